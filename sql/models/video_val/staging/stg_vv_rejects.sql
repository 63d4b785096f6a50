-- Staging: refused files and rows (and noted irregularities), one file per producing asset.
SELECT source_file, row_index, uid, action, reason, raw
FROM {{ source('video_val_raw', 'vv_rejects') }}
