-- Staging: the vv_response_files table as written by its asset.
SELECT *, {{abspath(folder)}} AS folder_abspath, {{abspath(archived_path)}} AS archived_abspath
FROM read_parquet('{{tables}}/vv_response_files.parquet')
