-- Staging: decoded plan frames, one Parquet file per data_source partition.
SELECT *,
       {{ abspath('video_path') }} AS video_abspath,
       {{ abspath('image_path') }} AS image_abspath
FROM {{ source('video_val_raw', 'vv_frames') }}
