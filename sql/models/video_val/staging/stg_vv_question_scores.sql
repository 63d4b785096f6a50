-- Staging: the vv_question_scores table as written by its asset (one part per checkpoint).
SELECT * FROM {{ source('video_val_raw', 'vv_question_scores') }}
