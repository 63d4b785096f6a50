-- Staging: accepted cases as written by the rvp_cases asset (rejected ones are in rvp_rejects).
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_cases') }}
