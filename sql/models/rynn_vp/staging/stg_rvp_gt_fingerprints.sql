-- Staging: the rvp_gt_fingerprints table as written by its asset.
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_gt_fingerprints') }}
