-- Accepted responses: one row per (run_id, step, uid, sample_idx), with where it was read.
SELECT run_id, step, uid, data_source, sample_idx, response, source_file, file_version, line
FROM {{ ref('stg_vv_responses') }}
