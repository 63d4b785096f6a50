-- Staging: candidates found under CANDIDATES_DIR (one row per system × case folder).
SELECT *, {{abspath(path)}} AS abspath
FROM read_parquet('{{tables}}/rvp_candidates.parquet')
