-- Rows whose video could not be resolved: the remapped path lies outside the video roots
-- (VIDEO_VAL_ROOTS, or the NEW sides of VIDEO_VAL_PREFIX_MAP; such a path is never opened, so a
-- parquet row cannot make benchlake read /etc/passwd), no prefix of the map matched, or the
-- file does not exist. They are kept in vv_questions; this lists them.
SELECT data_source, uid, video_uri, video_path, video_abspath, prefix_matched, video_in_roots,
       video_exists,
       CASE WHEN NOT prefix_matched AND NOT video_in_roots
                THEN 'no prefix of VIDEO_VAL_PREFIX_MAP matched (outside the video roots: '
                     || 'never opened)'
            WHEN NOT video_in_roots
                THEN 'outside the video roots (VIDEO_VAL_ROOTS or the NEW sides of '
                     || 'VIDEO_VAL_PREFIX_MAP): never opened'
            ELSE 'video file is missing' END AS problem
FROM {{ ref('stg_vv_questions') }}
WHERE NOT video_in_roots OR NOT video_exists
ORDER BY data_source, row_index
