-- Staging: every refusal, one Parquet file per producing asset under rvp_rejects/.
SELECT source_file, case_id, stage, reason
FROM {{ source('rynn_vp_raw', 'rvp_rejects') }}
