-- Staging: the vv_scored_responses table as written by its asset.
SELECT * FROM {{ source('video_val_raw', 'vv_scored_responses') }}
