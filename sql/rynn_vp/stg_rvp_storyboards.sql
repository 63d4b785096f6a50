-- Staging: storyboards, one Parquet file per case partition.
SELECT * FROM read_parquet('{{tables}}/rvp_storyboards/*.parquet', union_by_name = true)
