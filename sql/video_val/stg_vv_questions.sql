-- Staging: accepted parquet rows, flattened, with the remapped video path (new columns).
SELECT * FROM read_parquet('{{tables}}/vv_questions.parquet')
