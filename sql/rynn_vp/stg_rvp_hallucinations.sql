-- Staging: the rvp_hallucinations table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_hallucinations.parquet')
