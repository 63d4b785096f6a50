-- Staging: the vv_unknown_uids table as written by its asset (one part per response part).
SELECT * FROM {{ source('video_val_raw', 'vv_unknown_uids') }}
