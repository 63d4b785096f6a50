-- Staging: storyboards, one Parquet file per case partition.
SELECT *, {{ abspath('image_path') }} AS image_abspath
FROM {{ source('rynn_vp_raw', 'rvp_storyboards') }}
