-- Intermediate: every well-formed response record with its status. The key (run_id, step, uid,
-- sample_idx) is answered by its first record in (source_file, file_version, line) order:
-- `accepted`; a later record with the same response is a `duplicate`, with another response a
-- `conflict` (which record is first is decided in int_vv_later_records, which the scores read
-- too); a uid that is no question of vv_questions is `unknown_uid` (found when its part was
-- scored: stg_vv_unknown_uids, the responses the scores leave out). The reasons:
-- macros/vv_refusals.sql.
WITH statuses AS (
    SELECT r.run_id, r.step, r.uid, r.sample_idx, q.data_source, r.source_file, r.file_version,
           r.line, l.first,
           CASE WHEN u.line IS NOT NULL THEN 'unknown_uid'
                WHEN l.line IS NULL THEN 'accepted'
                ELSE {{ vv_later_status('l') }} END AS status
    FROM {{ ref('stg_vv_responses') }} AS r
    LEFT JOIN {{ ref('stg_vv_questions') }} AS q USING (uid)
    LEFT JOIN {{ ref('stg_vv_unknown_uids') }} AS u
      ON u.source_file = r.source_file AND u.file_version = r.file_version AND u.line = r.line
    LEFT JOIN {{ ref('int_vv_later_records') }} AS l
      ON l.source_file = r.source_file AND l.file_version = r.file_version AND l.line = r.line
)
SELECT run_id, step, uid, sample_idx, data_source, source_file, file_version, line, status,
       CASE status
           WHEN 'accepted' THEN NULL
           WHEN 'unknown_uid' THEN {{ vv_unknown_uid_reason('uid') }}
           ELSE {{ vv_later_reason('status', 'first') }}
       END AS reason
FROM statuses
