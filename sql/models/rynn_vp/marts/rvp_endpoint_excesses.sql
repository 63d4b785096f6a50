-- Anomaly: interval endpoints (start or end) beyond the metadata-derived GT duration. Each
-- endpoint counts once; `over_0_2s` marks the ones the card singles out (more than 0.2 s).
SELECT case_id, ordinal, "interval", endpoint, endpoint_s, duration_s,
       round(endpoint_s - duration_s, 6) AS excess_s,
       endpoint_s - duration_s > 0.2 AS over_0_2s
FROM (
    SELECT case_id, ordinal, "interval", 'start' AS endpoint, start_s AS endpoint_s, duration_s
    FROM {{ ref('rvp_intervals') }}
    UNION ALL
    SELECT case_id, ordinal, "interval", 'end', end_s, duration_s FROM {{ ref('rvp_intervals') }}
)
WHERE endpoint_s > duration_s
ORDER BY case_id, ordinal, endpoint DESC
