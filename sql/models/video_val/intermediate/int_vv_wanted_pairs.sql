-- Paired comparisons of checkpoints over the questions both answered, per scoring policy and
-- data_source (each source, and 'all'). The pairs: every run against every other run at the
-- same step; each run's best checkpoint against every other run's best; and within a run, every
-- checkpoint against the run's best (the runner-up's row is vv_best_checkpoints.best_vs_next_p).
-- accuracy_diff is the mean over common questions of (question accuracy - base question
-- accuracy), each a mean over its samples. Its SE is clustered by video like vv_scores', the
-- interval mean -/+ t(0.975, videos - 1) SE clipped to [-1, 1], p_value the two-sided paired t
-- test on it. mcnemar_p: McNemar's exact test (binomial on the discordant questions) when both
-- sides have one sample per common question, NULL otherwise. The statistics are the macro
-- vv_paired_comparisons (macros/), which vv_best_checkpoints shares.
WITH ranks AS MATERIALIZED (
    SELECT policy, run_id, step, rank FROM {{ ref('int_vv_checkpoint_ranks') }}
),
pairs AS (
    SELECT DISTINCT * FROM (
        SELECT a.policy, a.run_id, a.step, b.run_id AS base_run_id, b.step AS base_step
        FROM ranks AS a
        JOIN ranks AS b ON b.policy = a.policy AND b.step = a.step AND b.run_id <> a.run_id
        UNION ALL
        SELECT a.policy, a.run_id, a.step, b.run_id, b.step
        FROM ranks AS a
        JOIN ranks AS b ON b.policy = a.policy AND b.run_id <> a.run_id
        WHERE a.rank = 1 AND b.rank = 1
        UNION ALL
        SELECT a.policy, a.run_id, a.step, b.run_id, b.step
        FROM ranks AS a
        JOIN ranks AS b ON b.policy = a.policy AND b.run_id = a.run_id
        WHERE b.rank = 1 AND a.rank > 1
    )
)
SELECT * FROM {{ vv_paired_comparisons('pairs') }}
ORDER BY policy, run_id, step, base_run_id, base_step, data_source
