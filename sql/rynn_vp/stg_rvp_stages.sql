-- Staging: the rvp_stages table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_stages.parquet')
