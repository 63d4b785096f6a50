-- Per profile, judge run, system and case: the axis scores and totals of the final accepted
-- judgment. PI and VR are weighted sums of their metrics under the profile's weights (the PI-5
-- set when the case has an explicit plan; weight-0 metrics are diagnostic and never count); VQ is
-- the holistic VQ score. Rows of the evaluation grid without a final judgment keep NULL scores
-- and their `status`: missing is never 0.
WITH runs AS (SELECT DISTINCT judge_run_id FROM stg_rvp_judgments),
systems AS (
    SELECT system, string_agg(DISTINCT modality, '+' ORDER BY modality) AS system_modality
    FROM stg_rvp_candidates GROUP BY system
),
scored AS (
    SELECT v.profile, j.judge_run_id, j.system, j.case_id,
           CASE WHEN v.w_pi_1 = 0 THEN 0 ELSE j.pi_1 * v.w_pi_1 END
           + CASE WHEN v.w_pi_2 = 0 THEN 0 ELSE j.pi_2 * v.w_pi_2 END
           + CASE WHEN v.w_pi_3 = 0 THEN 0 ELSE j.pi_3 * v.w_pi_3 END
           + CASE WHEN v.w_pi_4 = 0 THEN 0 ELSE j.pi_4 * v.w_pi_4 END
           + CASE WHEN v.w_pi_5 = 0 THEN 0 ELSE j.pi_5 * v.w_pi_5 END
           + CASE WHEN v.w_pi_6 = 0 THEN 0 ELSE j.pi_6 * v.w_pi_6 END AS pi,
           CASE WHEN v.w_vr_1 = 0 THEN 0 ELSE j.vr_1 * v.w_vr_1 END
           + CASE WHEN v.w_vr_2 = 0 THEN 0 ELSE j.vr_2 * v.w_vr_2 END
           + CASE WHEN v.w_vr_3 = 0 THEN 0 ELSE j.vr_3 * v.w_vr_3 END
           + CASE WHEN v.w_vr_4 = 0 THEN 0 ELSE j.vr_4 * v.w_vr_4 END
           + CASE WHEN v.w_vr_5 = 0 THEN 0 ELSE j.vr_5 * v.w_vr_5 END
           + CASE WHEN v.w_vr_6 = 0 THEN 0 ELSE j.vr_6 * v.w_vr_6 END
           + CASE WHEN v.w_vr_7 = 0 THEN 0 ELSE j.vr_7 * v.w_vr_7 END
           + CASE WHEN v.w_vr_8 = 0 THEN 0 ELSE j.vr_8 * v.w_vr_8 END AS vr,
           CASE WHEN v.w_vq = 0 THEN 0 ELSE j.vq * v.w_vq END AS vq
    FROM stg_rvp_judgments AS j
    JOIN int_rvp_weight_vectors AS v ON v.has_explicit_plan = j.has_explicit_plan
    WHERE j.is_final
),
grid AS (
    -- every judge run seen × every system with candidates × every accepted case
    SELECT r.judge_run_id, s.system, c.case_id, c.scene, c.source_group, c.has_explicit_plan,
           coalesce(k.modality, s.system_modality) AS modality, k.ok AS candidate_ok
    FROM runs AS r
    CROSS JOIN systems AS s
    CROSS JOIN stg_rvp_cases AS c
    LEFT JOIN stg_rvp_candidates AS k ON k.system = s.system AND k.case_id = c.case_id
)
SELECT p.profile, g.judge_run_id, g.system, g.case_id, g.modality, g.scene, g.source_group,
       g.has_explicit_plan,
       CASE WHEN g.candidate_ok IS NULL THEN 'missing_candidate'
            WHEN NOT g.candidate_ok THEN 'unusable_candidate'
            WHEN x.case_id IS NULL THEN 'no_final_judgment'
            ELSE 'scored' END AS status,
       x.pi, x.vr, x.vq,
       p.w_pi * x.pi + p.w_vr * x.vr + p.w_vq * x.vq AS final_score,
       p.legacy_w_pi * x.pi + p.legacy_w_vr * x.vr AS legacy_final_score
FROM rvp_reporting_profiles AS p
CROSS JOIN grid AS g
LEFT JOIN scored AS x
       ON x.profile = p.profile AND x.judge_run_id = g.judge_run_id AND x.system = g.system
      AND x.case_id = g.case_id AND g.candidate_ok
