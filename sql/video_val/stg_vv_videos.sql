-- Staging: one PyAV probe per distinct remapped video.
SELECT * FROM read_parquet('{{tables}}/vv_videos.parquet')
