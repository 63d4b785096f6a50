-- Every refused response record or file (malformed, empty file, unknown uid, conflict) and
-- every ignored duplicate, with file, version, line, reason and the raw record: the text as read
-- for a malformed record, the record as parsed (JSON) for the others (the archived file version
-- keeps its bytes). Read from the few rows kept of each (stg_vv_unknown_uids,
-- int_vv_later_records), so counting them does not read every response of the campaign; the
-- same statuses and reasons as int_vv_response_status (macros/vv_refusals.sql).
SELECT source_file, file_version, line, reason, raw FROM {{ ref('stg_vv_response_rejects') }}
UNION ALL
SELECT source_file, file_version, line, {{ vv_unknown_uid_reason('u.uid') }},
       {{ vv_response_raw('u') }}
FROM {{ ref('stg_vv_unknown_uids') }} AS u
UNION ALL
SELECT l.source_file, l.file_version, l.line,
       {{ vv_later_reason(vv_later_status('l'), 'l.first') }}, {{ vv_response_raw('r') }}
FROM {{ ref('int_vv_later_records') }} AS l
JOIN {{ ref('stg_vv_responses') }} AS r USING (source_file, file_version, line)
