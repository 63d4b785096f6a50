-- One row per accepted val question. `uid` = <data_source>:<row_index> (0-based row of its
-- parquet). `video_path` is the local path after VIDEO_VAL_PREFIX_MAP; `video_uri` the original.
SELECT uid, data_source, row_index, question, option_letters, n_options, options,
       ground_truth, task, category, question_type, subject, source_id,
       video_path, video_abspath, video_uri, prefix_matched, video_in_roots, video_exists,
       fps, max_frames, min_pixels, max_pixels, source_file, source_fingerprint
FROM {{ ref('stg_vv_questions') }}
