-- Staging: candidates found under CANDIDATES_DIR (one row per system × case folder).
SELECT * FROM read_parquet('{{tables}}/rvp_candidates.parquet')
