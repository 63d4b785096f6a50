-- The scores under two scoring policies side by side, per run, checkpoint and data_source
-- (pick a pair with WHERE policy = '...' AND base_policy = '...'), with the deltas and how many
-- responses flipped (vv_policy_diff).
WITH flips AS (
    SELECT policy, base_policy, run_id, step, data_source, count(*) AS n_flipped
    FROM {{ ref('vv_policy_diff') }} GROUP BY ALL
)
SELECT a.policy, b.policy AS base_policy, a.run_id, a.step, a.data_source, a.n_responded,
       a.accuracy, b.accuracy AS base_accuracy, a.accuracy - b.accuracy AS delta_accuracy,
       a.format_rate, b.format_rate AS base_format_rate,
       a.format_rate - b.format_rate AS delta_format_rate,
       a.composite, b.composite AS base_composite, a.composite - b.composite AS delta_composite,
       coalesce(sum(f.n_flipped), 0) AS n_flipped
FROM {{ ref('vv_scores') }} AS a
JOIN {{ ref('vv_scores') }} AS b
  ON b.run_id = a.run_id AND b.step = a.step AND b.data_source = a.data_source
 AND b.policy <> a.policy
LEFT JOIN flips AS f ON f.policy = a.policy AND f.base_policy = b.policy
 AND f.run_id = a.run_id AND f.step = a.step
 AND (f.data_source = a.data_source OR a.data_source IN ('all', 'macro'))
GROUP BY ALL
ORDER BY a.policy, b.policy, a.run_id, a.step, a.data_source
