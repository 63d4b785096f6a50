-- The frames qwen-vl-utils 0.0.14 samples: height/width are the source video's, resized_* what
-- the model sees; `error` says why a video could not be planned (then the plan columns are null).
SELECT video_path, video_abspath, total_frames, video_fps, height, width, nframes, frame_indices,
       resized_height, resized_width, sample_fps, fps, max_frames, min_pixels, max_pixels,
       patch_size, max_pixels_used, error
FROM {{ ref('stg_vv_frame_plan') }}
