-- Intermediate: the pairs of checkpoints vv_run_pairs compares, per scoring policy: every run
-- against every other run at the same step; each run's best checkpoint against every other
-- run's best; and within a run, every checkpoint against the run's best (the runner-up's row is
-- vv_best_checkpoints.best_vs_next_p). With the part each side's questions come from
-- (stg_vv_question_scores.part): a pair is compared again only when one of its sides changed
-- (int_vv_pair_comparisons).
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
),
parts AS (SELECT DISTINCT run_id, step, part FROM {{ ref('int_vv_checkpoint_scores') }})
SELECT p.policy, p.run_id, p.step, p.base_run_id, p.base_step, a.part, b.part AS base_part
FROM pairs AS p
JOIN parts AS a ON a.run_id = p.run_id AND a.step = p.step
JOIN parts AS b ON b.run_id = p.base_run_id AND b.step = p.base_step
