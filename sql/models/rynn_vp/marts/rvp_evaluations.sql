-- One row per evaluation: the actual clip boundaries covered by the panels, truncation (fewer
-- than 30 panels, or steps cut to the 50-frame budget), steps shown, the unshown transitions
-- that stay evidence gaps, extra evidence, and the source-frame count (at most 50).
SELECT v.evaluation_id, v.system, v.case_id, v.modality, v.n_source_frames, v.clip_start_s,
       v.clip_end_s, v.n_panels, v.truncated, v.steps_total, v.steps_shown, v.evidence_gaps,
       v.extra_evidence, v.problem, v.candidate_fingerprint
FROM {{ ref('stg_rvp_evaluations') }} AS v
JOIN {{ ref('stg_rvp_cases') }} USING (case_id)
