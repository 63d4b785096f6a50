-- Every version of every file seen in JUDGMENTS_DIR (a changed file is a new version; the old
-- content stays in the archive and is still read). `folder` is the drop folder it came from:
-- versions from a folder the setting no longer names stay listed (never current, not read).
SELECT folder, folder_abspath, source_file, version, sha256, size_bytes, is_current,
       archived_path, archived_abspath
FROM {{ ref('stg_rvp_judgment_files') }}
