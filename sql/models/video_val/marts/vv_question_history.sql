-- Per item: every question's correctness at every checkpoint of its run, per scoring policy
-- (one row per policy, run, question and checkpoint), read from the per-question scores
-- (int_vv_row_scores: the samples counted once, when the checkpoint arrived), never from the
-- responses. correct_rate is the mean over the question's samples. A question is "right" at a
-- checkpoint when most of its samples are (correct_rate > 0.5; with one sample, when it is
-- right), so a flip is a change of that between two consecutive checkpoints of its run:
-- n_flips counts them over the run, last_flip_step is the step of the last one, and
-- first_right_step the first checkpoint the question was right at. The filter columns come
-- from the question (task, category, question_type, video); a response's extraction method is
-- per sample: vv_scored_responses on (run_id, step, uid) has it.
WITH scored AS (
    SELECT s.policy, s.run_id, s.uid, s.step, s.data_source, q.task, q.category,
           q.question_type, s.video, s.k AS n_samples, s.accuracy AS correct_rate,
           s.accuracy > 0.5 AS is_right
    FROM {{ ref('int_vv_row_scores') }} AS s
    LEFT JOIN {{ ref('stg_vv_questions') }} AS q USING (uid)
),
marked AS (
    SELECT *, lag(is_right) OVER (PARTITION BY policy, run_id, uid ORDER BY step) AS was_right
    FROM scored
)
SELECT policy, run_id, uid, step, data_source, task, category, question_type, video, n_samples,
       correct_rate, is_right, was_right IS NOT NULL AND was_right <> is_right AS flipped,
       min(step) FILTER (WHERE is_right) OVER run AS first_right_step,
       count(*) FILTER (WHERE was_right IS NOT NULL AND was_right <> is_right) OVER run
           AS n_flips,
       max(step) FILTER (WHERE was_right IS NOT NULL AND was_right <> is_right) OVER run
           AS last_flip_step
FROM marked
WINDOW run AS (PARTITION BY policy, run_id, uid)
