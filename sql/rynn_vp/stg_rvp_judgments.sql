-- Staging: the rvp_judgments table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_judgments.parquet')
