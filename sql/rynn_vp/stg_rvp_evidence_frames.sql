-- Staging: evidence frames, one Parquet file per case partition.
SELECT * FROM read_parquet('{{tables}}/rvp_evidence_frames/*.parquet', union_by_name = true)
