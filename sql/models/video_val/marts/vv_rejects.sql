-- Every refused val file or row (action file_rejected / row_rejected, with the raw row), and
-- irregularities that were kept (action noted), with the reason.
SELECT source_file, row_index, uid, action, reason, raw FROM {{ ref('stg_vv_rejects') }}
