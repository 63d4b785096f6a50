-- Staging: storyboards, one Parquet file per case partition.
SELECT *, {{abspath(image_path)}} AS image_abspath
FROM read_parquet('{{tables}}/rvp_storyboards/*.parquet', union_by_name = true)
