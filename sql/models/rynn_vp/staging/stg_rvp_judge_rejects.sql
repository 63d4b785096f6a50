-- Staging: the rvp_judge_rejects table as written by its asset.
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_judge_rejects') }}
