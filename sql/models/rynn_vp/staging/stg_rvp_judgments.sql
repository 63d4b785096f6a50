-- Staging: the rvp_judgments table as written by its asset.
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_judgments') }}
