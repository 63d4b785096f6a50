-- Per scoring policy and run, the checkpoint with the highest accuracy over data_source 'all'
-- (ties go to the earliest step; int_vv_checkpoint_ranks), and whether it is distinguishable from
-- the runner-up: best_vs_next_p is McNemar's exact p when both have one sample per question,
-- else the paired t test's, over the questions both answered: vv_run_pairs' row of the runner-up
-- against the best (every checkpoint of a run is compared with its best there).
WITH ranks AS MATERIALIZED (SELECT * FROM {{ ref('int_vv_checkpoint_ranks') }}),
runner_up AS (
    SELECT b.policy, b.run_id, n.step, b.run_id AS base_run_id, b.step AS base_step
    FROM ranks AS b
    JOIN ranks AS n ON n.policy = b.policy AND n.run_id = b.run_id AND n.rank = 2
    WHERE b.rank = 1
),
compared AS (
    SELECT p.* FROM {{ ref('vv_run_pairs') }} AS p
    SEMI JOIN runner_up AS u
           ON u.policy = p.policy AND u.run_id = p.run_id AND u.step = p.step
          AND u.base_run_id = p.base_run_id AND u.base_step = p.base_step
    WHERE p.data_source = 'all'
)
SELECT s.policy, s.run_id, s.step AS best_step, s.accuracy, s.accuracy_se, s.accuracy_ci_low,
       s.accuracy_ci_high, s.format_rate, s.composite, s.n_responded, s.n_rows,
       u.step AS next_step, nx.accuracy AS next_accuracy,
       coalesce(c.mcnemar_p, c.p_value) AS best_vs_next_p
FROM ranks AS s
LEFT JOIN runner_up AS u ON u.policy = s.policy AND u.run_id = s.run_id
LEFT JOIN ranks AS nx ON nx.policy = u.policy AND nx.run_id = u.run_id AND nx.step = u.step
LEFT JOIN compared AS c ON c.policy = s.policy AND c.run_id = s.run_id
WHERE s.rank = 1
ORDER BY s.policy, s.run_id
