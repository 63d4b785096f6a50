-- Every refused response record or file (malformed, empty file, unknown uid, conflict) and
-- every ignored duplicate, with file, version, line, reason and the raw record: the text as read
-- for a malformed record, the record as parsed (JSON) for the others (the archived file version
-- keeps its bytes).
SELECT source_file, file_version, line, reason, raw FROM {{ ref('stg_vv_response_rejects') }}
UNION ALL
SELECT a.source_file, a.file_version, a.line, a.reason,
       to_json(struct_pack(run_id := r.run_id, step := r.step, uid := r.uid,
                           sample_idx := r.sample_idx, response := r.response))::VARCHAR
FROM {{ ref('int_vv_response_status') }} AS a
JOIN {{ ref('stg_vv_responses') }} AS r USING (source_file, file_version, line)
WHERE a.status <> 'accepted'
