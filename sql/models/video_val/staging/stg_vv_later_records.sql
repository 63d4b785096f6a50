-- Staging: the vv_later_records table as written by its asset (one part per checkpoint).
SELECT * FROM {{ source('video_val_raw', 'vv_later_records') }}
