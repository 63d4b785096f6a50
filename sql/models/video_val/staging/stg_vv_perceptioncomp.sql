-- Staging, PerceptionComp only: it populates subject and source_id; five options (A-E), a few
-- questions six.
SELECT uid, row_index, question, option_letters, ground_truth, subject, source_id, video_uri,
       video_path
FROM {{ ref('stg_vv_questions') }} WHERE data_source = 'perceptioncomp_test'
