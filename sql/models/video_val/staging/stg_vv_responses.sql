-- Staging: the vv_responses table as written by its asset.
SELECT * FROM {{ source('video_val_raw', 'vv_responses') }}
