-- Staging: the qwen-vl-utils 0.0.14 frame plan per (video, settings).
SELECT *, {{ abspath('video_path') }} AS video_abspath
FROM {{ source('video_val_raw', 'vv_frame_plan') }}
