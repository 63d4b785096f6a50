-- Every input the ingest refused, with the file, the case (when known), the stage and why.
SELECT source_file, case_id, reason, stage FROM {{ ref('stg_rvp_rejects') }}
