-- Anomaly: final interval labels other than the terminal labels `Done` / `Done.` (e.g. the
-- release's `Down.`, kept as written).
SELECT case_id, ordinal, "interval", label
FROM {{ ref('rvp_intervals') }}
WHERE is_final AND NOT is_done_label
ORDER BY case_id
