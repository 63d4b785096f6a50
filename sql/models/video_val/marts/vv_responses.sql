-- Accepted responses: one row per (run_id, step, uid, sample_idx), the first record read of it,
-- with where it was read. A row of a verl validation dump also carries verl's own `score` and the
-- reward function's extra keys (`verl_extras`, JSON: acc, pred, ...).
SELECT r.run_id, r.step, r.uid, a.data_source, r.sample_idx, r.response, r.source_file,
       r.file_version, r.line, r.verl_score, r.verl_extras
FROM {{ ref('stg_vv_responses') }} AS r
JOIN {{ ref('int_vv_response_status') }} AS a USING (source_file, file_version, line)
WHERE a.status = 'accepted'
