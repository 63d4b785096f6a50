-- Staging: the vv_response_rejects table as written by its asset.
SELECT * FROM {{ source('video_val_raw', 'vv_response_rejects') }}
