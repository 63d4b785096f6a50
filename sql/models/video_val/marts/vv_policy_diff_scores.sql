-- The scores under two scoring policies side by side, per run, checkpoint and data_source
-- (pick a pair with WHERE policy = '...' AND base_policy = '...'), with the deltas and how many
-- responses flipped (the rows vv_policy_diff lists).
-- The flips are counted in one pass over the counted responses, each against every pair of
-- policies (a handful of rows), not by joining every response with itself: memory stays flat
-- whatever the campaign. `correct` is the same under every policy (int_vv_policy_responses),
-- so a response flips where the two policies' format rules disagree on it.
WITH flips AS (
    SELECT a.policy, b.policy AS base_policy, s.run_id, s.step, s.data_source,
           count(*) AS n_flipped
    FROM {{ ref('int_vv_accepted_scores') }} AS s
    CROSS JOIN {{ ref('vv_scoring_policies') }} AS a
    JOIN {{ ref('vv_scoring_policies') }} AS b ON b.policy <> a.policy
    WHERE {{ vv_format_ok('a.format_rule', 's') }} IS DISTINCT FROM
          {{ vv_format_ok('b.format_rule', 's') }}
    GROUP BY ALL
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
