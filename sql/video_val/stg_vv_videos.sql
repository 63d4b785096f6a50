-- Staging: one PyAV probe per distinct remapped video.
SELECT *, {{abspath(video_path)}} AS video_abspath
FROM read_parquet('{{tables}}/vv_videos.parquet')
