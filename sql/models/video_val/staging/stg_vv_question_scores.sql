-- Staging: the vv_question_scores table as written by its asset (one part per checkpoint), with
-- the part (file name) each row comes from: the incremental tables keep it, to read only the
-- parts they do not hold yet (macros/raw_parts.sql).
SELECT *, parse_filename(filename) AS part FROM {{ source('video_val_raw', 'vv_question_scores') }}
