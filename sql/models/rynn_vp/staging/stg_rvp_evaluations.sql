-- Staging: one row per evaluation (system × case), one Parquet file per case partition.
SELECT *, {{ abspath('candidate_path') }} AS candidate_abspath
FROM {{ source('rynn_vp_raw', 'rvp_evaluations') }}
