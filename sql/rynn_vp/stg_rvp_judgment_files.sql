-- Staging: the rvp_judgment_files table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_judgment_files.parquet')
