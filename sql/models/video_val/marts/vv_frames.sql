-- The frames of vv_frame_plan, decoded at the planned size (JPEG paths), per data_source.
SELECT data_source, video_path, video_abspath, patch_size, frame_no, frame_index, pts, used_s,
       width, height, image_path, image_abspath, error
FROM {{ ref('stg_vv_frames') }}
