-- One probe per distinct video referenced by vv_questions.
SELECT video_path, video_abspath, n_rows, ok, error, codec, width, height, fps, duration_s,
       frame_count, first_frame_s, last_frame_s, size_bytes
FROM {{ ref('stg_vv_videos') }}
