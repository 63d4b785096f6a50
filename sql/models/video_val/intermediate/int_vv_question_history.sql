-- Intermediate: every question's timeline within its run, kept one run at a time (an incremental
-- table: macros/vv_question_parts.sql, vv_changed_runs): one row per (run_id, uid, step) from the
-- question's counted samples at that checkpoint (stg_vv_question_scores), with
--   correct_rate        the share of its samples right (one sample: 0 or 1);
--   majority_correct    whether the majority letter is the ground truth (the vote of verl's
--                       maj@N and vv_sample_metrics; one sample: whether it is right). "Right at
--                       a step" means this, so a question with samples split 2/2 between its
--                       truth and one other letter is right only if the truth wins the tie
--                       (the alphabetically first letter does);
--   prev_*              the question's previous checkpoint in its run (the run's previous step
--                       when every checkpoint answered it) and its values there;
--   best_*              the run's best checkpoint (int_vv_checkpoint_ranks) and the question's
--                       values there (NULL when the best did not answer it);
--   flipped             majority_correct differs from the previous checkpoint's (a flip);
--   first_right_step, n_flips, last_flip_step, n_steps
--                       per (run_id, uid), over every checkpoint of the run that answered it.
-- The comparisons vv_flips lists are these columns side by side: no join of the campaign's
-- question rows with themselves when it is read.
-- Policies do not enter: the extracted letter, and so correctness, is the same under every
-- scoring policy (vv_scored_responses), and so is each run's best (ranked by accuracy alone);
-- were two policies ever to rank another best, the run's rows would be doubled and this table's
-- uniqueness test would fail. vv_question_history adds the policy column.
WITH questions AS (
    SELECT run_id, step, uid, data_source, ground_truth, k, n_correct, majority_letter,
           n_majority, n_fallback, n_none, letters, part
    FROM {{ ref('stg_vv_question_scores') }}
    WHERE {{ vv_changed_run_parts() }}
),
best AS (SELECT DISTINCT run_id, step AS best_step FROM {{ ref('int_vv_checkpoint_ranks') }}
         WHERE rank = 1),
rated AS (
    SELECT q.*, b.best_step, q.n_correct / q.k AS correct_rate,
           coalesce(q.majority_letter = q.ground_truth, false) AS majority_correct,
           -- the samples' method when they agree, else `mixed`
           CASE WHEN q.n_none = q.k THEN 'none' WHEN q.n_fallback = q.k THEN 'fallback'
                WHEN q.n_none + q.n_fallback = 0 THEN 'boxed_answer' ELSE 'mixed' END
               AS extraction_method
    FROM questions AS q LEFT JOIN best AS b USING (run_id)
),
ordered AS (
    SELECT *, lag(step) OVER w AS prev_step,
           {%- for c in ['correct_rate', 'majority_correct', 'majority_letter', 'letters',
                         'extraction_method', 'k'] %}
           lag({{ c }}) OVER w AS prev_{{ c }},
           max({{ c }}) FILTER (WHERE step = best_step) OVER q AS best_{{ c }}_at
           {{- ',' if not loop.last }}
           {%- endfor %}
    FROM rated
    WINDOW w AS (PARTITION BY run_id, uid ORDER BY step), q AS (PARTITION BY run_id, uid)
),
flagged AS (
    SELECT *, coalesce(majority_correct <> prev_majority_correct, false) AS flipped FROM ordered
)
SELECT run_id, uid, step, data_source, k AS n_samples, n_correct, correct_rate,
       majority_letter, n_majority, n_majority / k AS agreement, letters, n_fallback, n_none,
       extraction_method, majority_correct, flipped,
       prev_step, prev_correct_rate, prev_majority_correct, prev_majority_letter, prev_letters,
       prev_extraction_method, prev_k AS prev_n_samples,
       best_step, best_correct_rate_at AS best_correct_rate,
       best_majority_correct_at AS best_majority_correct,
       best_majority_letter_at AS best_majority_letter, best_letters_at AS best_letters,
       best_extraction_method_at AS best_extraction_method, best_k_at AS best_n_samples,
       count(*) OVER q AS n_steps,
       min(step) FILTER (WHERE majority_correct) OVER q AS first_right_step,
       count(*) FILTER (WHERE flipped) OVER q AS n_flips,
       max(step) FILTER (WHERE flipped) OVER q AS last_flip_step,
       part
FROM flagged
WINDOW q AS (PARTITION BY run_id, uid)
