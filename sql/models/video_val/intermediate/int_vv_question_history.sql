-- Intermediate: every question's timeline within its run, kept one run at a time (an incremental
-- table: macros/vv_question_parts.sql, vv_changed_runs): one row per (run_id, uid, step) from the
-- question's counted samples at that checkpoint (stg_vv_question_scores), with
--   correct_rate        the share of its samples right (one sample: 0 or 1);
--   majority_correct    whether the majority letter is the ground truth (the vote of verl's
--                       maj@N and vv_sample_metrics; one sample: whether it is right). "Right at
--                       a step" means this, so a question with samples split 2/2 between its
--                       truth and one other letter is right only if the truth wins the tie
--                       (the alphabetically first letter does);
--   prev_step, prev_correct_rate, prev_majority_correct
--                       the question's previous checkpoint in its run (the run's previous step
--                       when every checkpoint answered it) and its values there;
--   flipped             majority_correct differs from the previous checkpoint's (a flip);
--   first_right_step, n_flips, last_flip_step, n_steps
--                       per (run_id, uid), over every checkpoint of the run that answered it.
-- Policies do not enter: the extracted letter, and so correctness, is the same under every
-- scoring policy (vv_scored_responses); vv_question_history adds the policy column.
WITH questions AS (
    SELECT run_id, step, uid, data_source, ground_truth, k, n_correct, majority_letter,
           n_majority, n_fallback, n_none, letters, part
    FROM {{ ref('stg_vv_question_scores') }}
    WHERE {{ vv_changed_run_parts() }}
),
rated AS (
    SELECT *, n_correct / k AS correct_rate,
           coalesce(majority_letter = ground_truth, false) AS majority_correct
    FROM questions
),
ordered AS (
    SELECT *, lag(step) OVER w AS prev_step, lag(correct_rate) OVER w AS prev_correct_rate,
           lag(majority_correct) OVER w AS prev_majority_correct
    FROM rated
    WINDOW w AS (PARTITION BY run_id, uid ORDER BY step)
),
flagged AS (
    SELECT *, coalesce(majority_correct <> prev_majority_correct, false) AS flipped FROM ordered
)
SELECT run_id, uid, step, data_source, k AS n_samples, n_correct, correct_rate,
       majority_letter, n_majority, n_majority / k AS agreement, letters, n_fallback, n_none,
       -- the samples' method when they agree, else `mixed`
       CASE WHEN n_none = k THEN 'none' WHEN n_fallback = k THEN 'fallback'
            WHEN n_none + n_fallback = 0 THEN 'boxed_answer' ELSE 'mixed' END
           AS extraction_method,
       majority_correct, prev_step, prev_correct_rate, prev_majority_correct, flipped,
       count(*) OVER q AS n_steps,
       min(step) FILTER (WHERE majority_correct) OVER q AS first_right_step,
       count(*) FILTER (WHERE flipped) OVER q AS n_flips,
       max(step) FILTER (WHERE flipped) OVER q AS last_flip_step,
       part
FROM flagged
WINDOW q AS (PARTITION BY run_id, uid)
