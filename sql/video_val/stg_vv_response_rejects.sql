-- Staging: the vv_response_rejects table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/vv_response_rejects.parquet')
