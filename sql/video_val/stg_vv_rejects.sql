-- Staging: refused files and rows (and noted irregularities), one file per producing asset.
SELECT source_file, row_index, uid, action, reason, raw
FROM read_parquet('{{tables}}/vv_rejects/*.parquet', union_by_name = true)
