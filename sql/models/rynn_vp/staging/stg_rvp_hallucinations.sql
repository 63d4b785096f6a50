-- Staging: the rvp_hallucinations table as written by its asset.
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_hallucinations') }}
