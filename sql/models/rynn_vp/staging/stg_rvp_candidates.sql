-- Staging: candidates found under CANDIDATES_DIR (one row per system × case folder).
SELECT *, {{ abspath('path') }} AS abspath
FROM {{ source('rynn_vp_raw', 'rvp_candidates') }}
