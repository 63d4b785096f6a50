-- Staging: the vv_responses table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/vv_responses.parquet')
