-- Staging: the val parquets read (one row per file) and the revision they came from.
SELECT *,
       {{ abspath('local_path') }} AS local_abspath,
       {{ abspath('file_path') }} AS file_abspath
FROM {{ source('video_val_raw', 'vv_source') }}
