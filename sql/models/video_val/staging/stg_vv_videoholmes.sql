-- Staging, Video-Holmes only: it populates source_id; six options (A-F).
SELECT uid, row_index, question, option_letters, ground_truth, source_id, video_uri, video_path
FROM {{ ref('stg_vv_questions') }} WHERE data_source = 'video_holmes_test'
