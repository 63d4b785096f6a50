-- Every source frame a judge sees, per evaluation: S0 (initial.png), GT anchors (`requested_s`
-- is the interval's raw end; `used_s`/`pts`/`frame_index` the frame actually decoded after
-- clamping), 30 dense candidate panels, or candidate steps (no timestamps: `step_id` instead).
-- Restricted to currently accepted cases, so a stale partition file never leaks in.
SELECT e.evidence_id, e.evaluation_id, e.system, e.case_id, e.role, e.ordinal, e.source_path,
       e.source_abspath, e.source_fingerprint, e.requested_s, e.used_s, e.pts, e.frame_index,
       e.clamped, e.image_path, e.image_abspath, e.width, e.height, e.step_id, e.interval_ordinal,
       e.label
FROM {{ ref('stg_rvp_evidence_frames') }} AS e
JOIN {{ ref('stg_rvp_cases') }} USING (case_id)
