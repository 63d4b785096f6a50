-- Staging: one row per evaluation (system × case), one Parquet file per case partition.
SELECT *, {{abspath(candidate_path)}} AS candidate_abspath
FROM read_parquet('{{tables}}/rvp_evaluations/*.parquet', union_by_name = true)
