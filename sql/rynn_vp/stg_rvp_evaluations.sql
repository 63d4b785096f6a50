-- Staging: one row per evaluation (system × case), one Parquet file per case partition.
SELECT * FROM read_parquet('{{tables}}/rvp_evaluations/*.parquet', union_by_name = true)
