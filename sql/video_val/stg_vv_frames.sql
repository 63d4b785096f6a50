-- Staging: decoded plan frames, one Parquet file per data_source partition.
SELECT *, {{abspath(video_path)}} AS video_abspath, {{abspath(image_path)}} AS image_abspath
FROM read_parquet('{{tables}}/vv_frames/*.parquet', union_by_name = true)
