-- Staging, Video-MME only: it populates task, category, question_type (the video duration
-- class: short / medium / long) and subject; source_id is null by the card.
SELECT uid, row_index, question, option_letters, ground_truth, task, category, question_type,
       subject, video_uri, video_path
FROM {{ ref('stg_vv_questions') }} WHERE data_source = 'videomme_v1_test'
