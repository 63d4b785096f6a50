-- Staging: accepted parquet rows, flattened, with the remapped video path (new columns).
SELECT *, {{ abspath('video_path') }} AS video_abspath
FROM {{ source('video_val_raw', 'vv_questions') }}
