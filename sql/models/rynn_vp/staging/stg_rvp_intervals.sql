-- Staging: planning intervals as parsed, in JSON insertion order (`ordinal`, 1-based).
SELECT case_id, ordinal, "interval", start_s, end_s, label
FROM {{ source('rynn_vp_raw', 'rvp_intervals') }}
