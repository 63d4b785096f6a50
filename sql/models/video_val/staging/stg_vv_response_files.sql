-- Staging: the vv_response_files table as written by its asset.
SELECT *,
       {{ abspath('folder') }} AS folder_abspath,
       {{ abspath('archived_path') }} AS archived_abspath
FROM {{ source('video_val_raw', 'vv_response_files') }}
