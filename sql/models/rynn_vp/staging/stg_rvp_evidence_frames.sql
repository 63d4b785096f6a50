-- Staging: evidence frames, one Parquet file per case partition.
SELECT *,
       {{ abspath('source_path') }} AS source_abspath,
       {{ abspath('image_path') }} AS image_abspath
FROM {{ source('rynn_vp_raw', 'rvp_evidence_frames') }}
