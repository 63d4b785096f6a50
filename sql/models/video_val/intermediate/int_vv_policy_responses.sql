-- Intermediate: every response under every scoring policy (vv_scoring_policies): the
-- `extracted` letter and `extraction_method` (boxed_answer / fallback / none) are the same
-- under every policy; `format_ok` is the column of the policy's format rule (vv_format_rules,
-- macro vv_format_ok) and `composite` its weighted sum.
SELECT p.policy, s.run_id, s.step, s.uid, s.sample_idx, s.data_source, s.extracted,
       s.extraction_method, s.correct,
       {{ vv_format_ok('p.format_rule', 's') }} AS format_ok,
       p.accuracy_weight * CAST(s.correct AS DOUBLE) + p.format_weight * CAST(
           {{ vv_format_ok('p.format_rule', 's') }} AS DOUBLE) AS composite,
       s.option_letters, s.ground_truth
FROM {{ ref('int_vv_accepted_scores') }} AS s
CROSS JOIN {{ ref('vv_scoring_policies') }} AS p
