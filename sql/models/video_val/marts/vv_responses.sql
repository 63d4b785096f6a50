-- Accepted responses: one row per (run_id, step, uid, sample_idx), the first record read of it,
-- with where it was read. A row of another tool's output (a verl validation dump, an lmms-eval
-- sample log) also carries the tool's name, its own score and its other values (JSON).
SELECT r.run_id, r.step, r.uid, a.data_source, r.sample_idx, r.response, r.source_file,
       r.file_version, r.line, r.tool, r.tool_score, r.tool_extras
FROM {{ ref('stg_vv_responses') }} AS r
JOIN {{ ref('int_vv_response_status') }} AS a USING (source_file, file_version, line)
WHERE a.status = 'accepted'
