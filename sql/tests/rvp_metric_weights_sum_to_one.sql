-- The weights of an axis sum to 1 for each profile, on each side of PI-5's activation: a case
-- without an explicit plan reads the `any` and `without_plan` rows, one with a plan the `any` and
-- `with_plan` rows (as int_rvp_weight_vectors resolves them). A row returned is a profile, axis
-- and side whose weights do not.
WITH sides(has_explicit_plan) AS (VALUES (false), (true))
SELECT w.profile, w.axis, s.has_explicit_plan, sum(w.weight) AS total
FROM {{ ref('rvp_metric_weights') }} AS w
CROSS JOIN sides AS s
WHERE w.plan_rule = 'any' OR (w.plan_rule = 'with_plan') = s.has_explicit_plan
GROUP BY w.profile, w.axis, s.has_explicit_plan
HAVING abs(sum(w.weight) - 1) > 1e-9
