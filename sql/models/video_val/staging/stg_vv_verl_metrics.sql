-- Staging: the vv_verl_metrics table as written by its asset.
SELECT * FROM {{ source('video_val_raw', 'vv_verl_metrics') }}
