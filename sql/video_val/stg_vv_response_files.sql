-- Staging: the vv_response_files table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/vv_response_files.parquet')
