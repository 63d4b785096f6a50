-- Per profile, judge run, system and case: the axis scores and totals of the final accepted
-- judgment. PI and VR are weighted sums of their metrics under the profile's weights (the PI-5
-- set when the case has an explicit plan; weight-0 metrics are diagnostic and never count); VQ is
-- the holistic VQ score. Rows of the evaluation grid without a final judgment keep NULL scores
-- and their `status`: missing is never 0.
WITH runs AS (SELECT DISTINCT judge_run_id FROM {{ ref('stg_rvp_judgments') }}),
systems AS (
    SELECT system, string_agg(DISTINCT modality, '+' ORDER BY modality) AS system_modality
    FROM {{ ref('stg_rvp_candidates') }} GROUP BY system
),
scored AS (
    -- PI, VR, VQ of each final judgment under each profile (metrics x weights, as data)
    SELECT profile, judge_run_id, system, case_id, pi, vr, vq
    FROM {{ ref('int_rvp_axis_scores') }}
),
grid AS (
    -- every judge run seen × every system with candidates × every accepted case
    SELECT r.judge_run_id, s.system, c.case_id, c.scene, c.source_group, c.has_explicit_plan,
           coalesce(k.modality, s.system_modality) AS modality, k.ok AS candidate_ok
    FROM runs AS r
    CROSS JOIN systems AS s
    CROSS JOIN {{ ref('stg_rvp_cases') }} AS c
    LEFT JOIN {{ ref('stg_rvp_candidates') }} AS k ON k.system = s.system AND k.case_id = c.case_id
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
FROM {{ ref('rvp_reporting_profiles') }} AS p
CROSS JOIN grid AS g
LEFT JOIN scored AS x
       ON x.profile = p.profile AND x.judge_run_id = g.judge_run_id AND x.system = g.system
      AND x.case_id = g.case_id AND g.candidate_ok
