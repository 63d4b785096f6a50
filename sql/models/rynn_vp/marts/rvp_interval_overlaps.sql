-- Anomaly: intervals starting before their predecessor ends.
SELECT case_id, ordinal, prev_interval, "interval", round(overlap_prev_s, 6) AS overlap_s
FROM {{ ref('rvp_intervals') }}
WHERE overlap_prev_s > 0
ORDER BY case_id, ordinal
