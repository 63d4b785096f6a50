-- Staging: evidence frames, one Parquet file per case partition.
SELECT *, {{abspath(source_path)}} AS source_abspath, {{abspath(image_path)}} AS image_abspath
FROM read_parquet('{{tables}}/rvp_evidence_frames/*.parquet', union_by_name = true)
