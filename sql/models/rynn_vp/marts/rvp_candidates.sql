-- Candidates per system and case. `modality` is video or images: the two protocols have
-- different temporal evidence and are never mixed silently downstream.
SELECT system, case_id, modality, path, abspath, fingerprint, duration_s, step_count, frame_count,
       first_frame_s, last_frame_s, step_ids, width, height, ok, problem
FROM {{ ref('stg_rvp_candidates') }}
