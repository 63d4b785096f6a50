-- Staging: every refusal, one Parquet file per producing asset under rvp_rejects/.
SELECT source_file, case_id, stage, reason
FROM read_parquet('{{tables}}/rvp_rejects/*.parquet', union_by_name = true)
