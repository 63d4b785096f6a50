-- Intermediate: one row per (policy, run, step, question): the mean over its samples (a single
-- sample is itself), so a question weighs the same whatever its number of samples.
SELECT policy, run_id, step, uid, data_source, count(*) AS k,
       avg(CAST(correct AS DOUBLE)) AS accuracy, avg(CAST(format_ok AS DOUBLE)) AS format_rate,
       avg(composite) AS composite
FROM {{ ref('int_vv_policy_responses') }}
GROUP BY policy, run_id, step, uid, data_source
