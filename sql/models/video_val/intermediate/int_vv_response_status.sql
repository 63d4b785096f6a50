-- Intermediate: every well-formed response record with its status. The key (run_id, step, uid,
-- sample_idx) is answered by its first record in (source_file, file_version, line) order:
-- `accepted`; a later record with the same response is a `duplicate`, with another response a
-- `conflict` (which record is first is decided in int_vv_later_records, which the scores read
-- too); a uid that is no question of vv_questions is `unknown_uid`.
WITH statuses AS (
    SELECT r.run_id, r.step, r.uid, r.sample_idx, q.data_source, r.source_file, r.file_version,
           r.line, l.first,
           CASE WHEN q.data_source IS NULL THEN 'unknown_uid'
                WHEN l.first IS NULL THEN 'accepted'
                WHEN l.first.response_digest = r.response_digest THEN 'duplicate'
                ELSE 'conflict' END AS status
    FROM {{ ref('stg_vv_responses') }} AS r
    LEFT JOIN {{ ref('stg_vv_questions') }} AS q USING (uid)
    LEFT JOIN {{ ref('int_vv_later_records') }} AS l
      ON l.source_file = r.source_file AND l.file_version = r.file_version AND l.line = r.line
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
