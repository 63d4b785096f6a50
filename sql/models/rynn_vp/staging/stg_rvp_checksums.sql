-- Staging: one row per file of the snapshot with its SHA256SUMS verdict.
SELECT rel_path, case_id, size_bytes, expected_sha256, actual_sha256, status
FROM {{ source('rynn_vp_raw', 'rvp_checksums') }}
