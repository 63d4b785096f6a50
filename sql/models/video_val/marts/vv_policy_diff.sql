-- What changes between two scoring policies, per response (pick a pair with
-- WHERE policy = '...' AND base_policy = '...'): only the rows whose format_ok or correct
-- flips, with both values. Extraction is the same under the current policies, so today only
-- format flips; a policy with another extraction rule would show its `correct` flips here too.
SELECT a.policy, b.policy AS base_policy, a.run_id, a.step, a.uid, a.sample_idx, a.data_source,
       a.format_ok, b.format_ok AS base_format_ok, a.correct, b.correct AS base_correct,
       a.composite, b.composite AS base_composite
FROM {{ ref('vv_scored_responses') }} AS a
JOIN {{ ref('vv_scored_responses') }} AS b
  ON b.run_id = a.run_id AND b.step = a.step AND b.uid = a.uid AND b.sample_idx = a.sample_idx
 AND b.policy <> a.policy
WHERE a.format_ok IS DISTINCT FROM b.format_ok OR a.correct IS DISTINCT FROM b.correct
ORDER BY a.policy, b.policy, a.run_id, a.step, a.uid, a.sample_idx
