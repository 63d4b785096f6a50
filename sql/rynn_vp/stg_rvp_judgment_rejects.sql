-- Staging: the rvp_judgment_rejects table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_judgment_rejects.parquet')
