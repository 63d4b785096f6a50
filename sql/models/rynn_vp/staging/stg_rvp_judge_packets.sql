-- Staging: the rvp_judge_packets table as written by its asset.
SELECT *, {{ abspath('packet_path') }} AS packet_abspath
FROM {{ source('rynn_vp_raw', 'rvp_judge_packets') }}
