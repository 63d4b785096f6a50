-- Every refused judgment or GT-compilation record (or whole file), with file, version, line,
-- the reason and the raw text: nothing a judge wrote is lost. Duplicates (same content hash)
-- are listed here too, as ignored.
SELECT source_file, line, reason, raw, file_version FROM {{ ref('stg_rvp_judgment_rejects') }}
