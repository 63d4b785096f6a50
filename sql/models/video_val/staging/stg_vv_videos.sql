-- Staging: one PyAV probe per distinct remapped video.
SELECT *, {{ abspath('video_path') }} AS video_abspath
FROM {{ source('video_val_raw', 'vv_videos') }}
