-- Intermediate: rvp_metric_weights resolved per profile for a case with and without an explicit
-- plan: one row per metric that applies there (plan_rule 'any' always; 'with_plan' /
-- 'without_plan' only on that side), so a judgment is scored by one join on
-- (has_explicit_plan, metric). A metric listed twice for the same profile and side has its
-- weights added. Still pure data: no weight is written here.
WITH plans(has_explicit_plan) AS (VALUES (false), (true))
SELECT w.profile, p.has_explicit_plan, w.axis, w.metric,
       -- the judgments' column for the metric (PI-1 -> pi_1, VQ-D1 -> vq_d1) from the metric
       -- list: looked up on these few rows, so the join with the unpivoted judgments compares
       -- column names as they are
       m."column" AS metric_column,
       sum(w.weight ORDER BY w.weight) AS weight
FROM {{ ref('rvp_metric_weights') }} AS w
JOIN {{ ref('rvp_metrics') }} AS m USING (metric)
CROSS JOIN plans AS p
WHERE w.plan_rule = 'any' OR (w.plan_rule = 'with_plan') = p.has_explicit_plan
GROUP BY w.profile, p.has_explicit_plan, w.axis, w.metric, m."column"
