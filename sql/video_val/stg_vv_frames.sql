-- Staging: decoded plan frames, one Parquet file per data_source partition.
SELECT * FROM read_parquet('{{tables}}/vv_frames/*.parquet', union_by_name = true)
