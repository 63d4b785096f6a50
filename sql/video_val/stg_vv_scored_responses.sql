-- Staging: the vv_scored_responses table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/vv_scored_responses.parquet')
