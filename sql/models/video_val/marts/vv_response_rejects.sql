-- Every refused response record or file (unknown uid, malformed, empty file, conflict) and
-- every ignored duplicate, with file, version, line, reason and the raw record.
SELECT source_file, file_version, line, reason, raw FROM {{ ref('stg_vv_response_rejects') }}
