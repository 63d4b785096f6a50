-- Rows whose video could not be resolved: no prefix of VIDEO_VAL_PREFIX_MAP matched, or the
-- remapped file does not exist. They are kept in vv_questions; this lists them.
SELECT data_source, uid, video_uri, video_path, video_abspath, prefix_matched, video_exists,
       CASE WHEN NOT prefix_matched THEN 'no prefix of VIDEO_VAL_PREFIX_MAP matched'
            ELSE 'video file is missing' END AS problem
FROM stg_vv_questions
WHERE NOT prefix_matched OR NOT video_exists
ORDER BY data_source, row_index
