-- Staging: planning intervals as parsed, in JSON insertion order (`ordinal`, 1-based).
SELECT case_id, ordinal, "interval", start_s, end_s, label
FROM read_parquet('{{tables}}/rvp_intervals.parquet')
