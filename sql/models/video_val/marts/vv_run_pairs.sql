-- Paired comparisons of checkpoints over the questions both answered, per scoring policy and
-- data_source (each source, and 'all'). The pairs (int_vv_wanted_pairs): every run against every
-- other run at the same step; each run's best checkpoint against every other run's best; and
-- within a run, every checkpoint against the run's best (the runner-up's row is
-- vv_best_checkpoints.best_vs_next_p).
-- accuracy_diff is the mean over common questions of (question accuracy - base question
-- accuracy), each a mean over its samples. Its SE is clustered by video like vv_scores', the
-- interval mean -/+ t(0.975, videos - 1) SE clipped to [-1, 1], p_value the two-sided paired t
-- test on it. mcnemar_p: McNemar's exact test (binomial on the discordant questions) when both
-- sides have one sample per common question, NULL otherwise. The statistics are the macro
-- vv_paired_comparisons (macros/); each pair is computed once, when one of its sides arrives or
-- changes (int_vv_pair_comparisons).
SELECT policy, run_id, step, base_run_id, base_step, data_source, n_common, accuracy_diff,
       diff_se, diff_ci_low, diff_ci_high, p_value, mcnemar_p, n_only_run, n_only_base
FROM {{ ref('int_vv_pair_comparisons') }}
ORDER BY policy, run_id, step, base_run_id, base_step, data_source
