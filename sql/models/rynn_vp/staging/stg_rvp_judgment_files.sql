-- Staging: the rvp_judgment_files table as written by its asset.
SELECT *,
       {{ abspath('folder') }} AS folder_abspath,
       {{ abspath('archived_path') }} AS archived_abspath
FROM {{ source('rynn_vp_raw', 'rvp_judgment_files') }}
