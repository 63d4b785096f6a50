-- Per profile, judge run, system and case: the axis scores and totals of the final accepted
-- judgment. PI/VR are weighted sums of their metrics under the profile's weights (PI-5 weights
-- when the case has an explicit plan); VQ is the holistic VQ score. Rows of the evaluation grid
-- without a final judgment keep NULL scores and their `status`: missing is never 0.
WITH axis AS (
    SELECT w.profile, m.judge_run_id, m.system, m.case_id,
           sum(w.weight * m.score) FILTER (WHERE w.axis = 'PI') AS pi,
           sum(w.weight * m.score) FILTER (WHERE w.axis = 'VR') AS vr,
           sum(w.weight * m.score) FILTER (WHERE w.axis = 'VQ') AS vq
    FROM int_rvp_metric_scores AS m
    JOIN rvp_metric_weights AS w
      ON w.metric = m.metric
     AND (w.plan_rule = 'any'
          OR (w.plan_rule = 'with_plan' AND m.has_explicit_plan)
          OR (w.plan_rule = 'without_plan' AND NOT m.has_explicit_plan))
    GROUP BY ALL
)
SELECT p.profile, g.judge_run_id, g.system, g.case_id, g.modality, g.scene, g.source_group,
       g.has_explicit_plan, g.status, a.pi, a.vr, a.vq,
       p.w_pi * a.pi + p.w_vr * a.vr + p.w_vq * a.vq AS final_score,
       p.legacy_w_pi * a.pi + p.legacy_w_vr * a.vr AS legacy_final_score
FROM rvp_reporting_profiles AS p
CROSS JOIN int_rvp_evaluation_grid AS g
LEFT JOIN axis AS a
       ON a.profile = p.profile AND a.judge_run_id = g.judge_run_id AND a.system = g.system
      AND a.case_id = g.case_id AND g.status = 'scored'
