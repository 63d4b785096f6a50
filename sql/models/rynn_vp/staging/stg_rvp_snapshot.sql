-- Staging: the acquired snapshot (one row): where it came from and the revision actually read.
-- Paths inside BENCHLAKE_HOME are stored relative to it; *_abspath resolves them.
SELECT *, {{ abspath('local_path') }} AS local_abspath
FROM {{ source('rynn_vp_raw', 'rvp_snapshot') }}
