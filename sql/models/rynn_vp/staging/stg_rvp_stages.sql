-- Staging: the rvp_stages table as written by its asset.
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_stages') }}
