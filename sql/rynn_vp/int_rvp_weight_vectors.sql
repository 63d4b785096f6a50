-- Intermediate: rvp_metric_weights turned into one row of weights per (profile, explicit plan
-- or not), so a judgment is scored with plain arithmetic on its metric columns (fast at scale).
-- Metrics a profile does not list get weight 0. Still pure data: no weight is written here.
WITH plans(has_explicit_plan) AS (VALUES (false), (true)),
applicable AS (
    SELECT w.profile, p.has_explicit_plan, w.axis, w.metric, w.weight
    FROM rvp_metric_weights AS w CROSS JOIN plans AS p
    WHERE w.plan_rule = 'any' OR (w.plan_rule = 'with_plan') = p.has_explicit_plan
)
SELECT profile, has_explicit_plan,
       coalesce(sum(weight) FILTER (WHERE metric = 'PI-1'), 0) AS w_pi_1,
       coalesce(sum(weight) FILTER (WHERE metric = 'PI-2'), 0) AS w_pi_2,
       coalesce(sum(weight) FILTER (WHERE metric = 'PI-3'), 0) AS w_pi_3,
       coalesce(sum(weight) FILTER (WHERE metric = 'PI-4'), 0) AS w_pi_4,
       coalesce(sum(weight) FILTER (WHERE metric = 'PI-5'), 0) AS w_pi_5,
       coalesce(sum(weight) FILTER (WHERE metric = 'PI-6'), 0) AS w_pi_6,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-1'), 0) AS w_vr_1,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-2'), 0) AS w_vr_2,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-3'), 0) AS w_vr_3,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-4'), 0) AS w_vr_4,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-5'), 0) AS w_vr_5,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-6'), 0) AS w_vr_6,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-7'), 0) AS w_vr_7,
       coalesce(sum(weight) FILTER (WHERE metric = 'VR-8'), 0) AS w_vr_8,
       coalesce(sum(weight) FILTER (WHERE metric = 'VQ'), 0) AS w_vq
FROM applicable
GROUP BY profile, has_explicit_plan
