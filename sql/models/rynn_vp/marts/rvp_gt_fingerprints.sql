-- The GT compilation cache key per accepted case: SHA-256 over the SHA-256 of task.json,
-- initial.png, gt.mp4, gt_annotations.json (in that order) and the prompt version in effect.
SELECT case_id, fingerprint, prompt_version, prompt_source, task_json_sha256,
       initial_png_sha256, gt_mp4_sha256, gt_annotations_json_sha256
FROM {{ ref('stg_rvp_gt_fingerprints') }}
