-- Staging: the rvp_judgment_rejects table as written by its asset.
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_judgment_rejects') }}
