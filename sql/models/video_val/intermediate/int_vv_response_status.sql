-- Intermediate: every well-formed response record with its status. The key (run_id, step, uid,
-- sample_idx) is answered by its first record in (source_file, file_version, line) order:
-- `accepted`; a later record with the same response is a `duplicate`, with another response a
-- `conflict`; a uid that is no question of vv_questions is `unknown_uid`. Only keys read more than
-- once are compared, so a campaign without repeats costs one aggregation.
WITH responses AS (
    SELECT r.run_id, r.step, r.uid, r.sample_idx, r.response_digest, r.source_file,
           r.file_version, r.line, q.data_source
    FROM {{ ref('stg_vv_responses') }} AS r
    LEFT JOIN {{ ref('stg_vv_questions') }} AS q USING (uid)
),
repeated AS (
    SELECT run_id, step, uid, sample_idx,
           arg_min(struct_pack(source_file, file_version, line, response_digest),
                   struct_pack(source_file, file_version, line)) AS first
    FROM responses WHERE data_source IS NOT NULL
    GROUP BY run_id, step, uid, sample_idx HAVING count(*) > 1
),
statuses AS (
    SELECT r.*, k.first,
           CASE WHEN r.data_source IS NULL THEN 'unknown_uid'
                WHEN k.first IS NULL OR (k.first.source_file = r.source_file
                     AND k.first.file_version = r.file_version AND k.first.line = r.line)
                    THEN 'accepted'
                WHEN k.first.response_digest = r.response_digest THEN 'duplicate'
                ELSE 'conflict' END AS status
    FROM responses AS r LEFT JOIN repeated AS k USING (run_id, step, uid, sample_idx)
)
SELECT run_id, step, uid, sample_idx, data_source, source_file, file_version, line, status,
       CASE status
           WHEN 'unknown_uid' THEN 'unknown uid ''' || uid || ''': not a question of vv_questions'
           WHEN 'duplicate' THEN 'duplicate of ' || first.source_file || ' v'
               || first.file_version || ' line ' || first.line || ' (same content): ignored'
           WHEN 'conflict' THEN 'conflicts with ' || first.source_file || ' v'
               || first.file_version || ' line ' || first.line
               || ': same run_id/step/uid/sample_idx, different response (use another sample_idx)'
       END AS reason
FROM statuses
