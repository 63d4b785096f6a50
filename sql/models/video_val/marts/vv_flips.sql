-- Per item: the questions whose correctness changed between two checkpoints of a run (delta <> 0,
-- delta = correct_rate - base_correct_rate: > 0 gained, < 0 lost), per scoring policy, for each
-- checkpoint against the previous step of its run (comparison 'previous') and against its run's
-- best checkpoint (comparison 'best', vv_best_checkpoints). Any other two checkpoints, of one
-- run or two: the same self-join of vv_question_history on uid at the chosen steps. Both
-- responses and their extracted letters: vv_scored_responses on (run_id, step, uid) and on
-- (base_run_id, base_step, uid). vv_flip_groups counts them per video and category.
WITH scored AS (
    SELECT policy, run_id, uid, step, data_source, category, video, correct_rate
    FROM {{ ref('vv_question_history') }}
),
steps AS (SELECT DISTINCT policy, run_id, step FROM scored),
pairs AS (
    SELECT * FROM (
        SELECT policy, run_id, step, 'previous' AS comparison,
               lag(step) OVER (PARTITION BY policy, run_id ORDER BY step) AS base_step
        FROM steps)
    WHERE base_step IS NOT NULL
    UNION ALL
    SELECT s.policy, s.run_id, s.step, 'best' AS comparison, b.best_step AS base_step
    FROM steps AS s
    JOIN {{ ref('vv_best_checkpoints') }} AS b USING (policy, run_id)
    WHERE s.step <> b.best_step
)
SELECT p.policy, p.run_id, p.step, p.run_id AS base_run_id, p.base_step, p.comparison, a.uid,
       a.data_source, a.category, a.video, a.correct_rate, b.correct_rate AS base_correct_rate,
       a.correct_rate - b.correct_rate AS delta,
       CASE WHEN a.correct_rate > b.correct_rate THEN 'gained' ELSE 'lost' END AS direction
FROM pairs AS p
JOIN scored AS a ON a.policy = p.policy AND a.run_id = p.run_id AND a.step = p.step
JOIN scored AS b ON b.policy = p.policy AND b.run_id = p.run_id AND b.step = p.base_step
                AND b.uid = a.uid
WHERE a.correct_rate <> b.correct_rate
