-- Staging: the val parquets read (one row per file) and the revision they came from.
SELECT * FROM read_parquet('{{tables}}/vv_source.parquet')
