-- Intermediate: every question's own values at each checkpoint of its run, and its previous
-- checkpoint's beside them; kept one run's TAIL at a time (an incremental table:
-- macros/vv_question_parts.sql, vv_changed_tails). One row per (run_id, uid, step) from the
-- question's counted samples at that checkpoint (stg_vv_question_scores), with
--   correct_rate        the share of its samples right (one sample: 0 or 1);
--   majority_correct    whether the majority letter is the ground truth (the vote of verl's
--                       maj@N and vv_sample_metrics; one sample: whether it is right). "Right at
--                       a step" means this, so a question with samples split 2/2 between its
--                       truth and one other letter is right only if the truth wins the tie
--                       (the alphabetically first letter does);
--   prev_*              the question's previous checkpoint in its run (the run's previous step
--                       when every checkpoint answered it) and its values there;
--   flipped             majority_correct differs from the previous checkpoint's (a flip).
-- A checkpoint added, rewritten or gone changes the rows from its step on (their prev_* may
-- change), never an earlier one: only that tail of its run is computed again, so a checkpoint
-- appended after the others costs its own rows, whatever the length of its run. The rows
-- before the tail are read only for the last one of each question (its prev_*). Each row keeps
-- the number of the build that wrote it (build_seq): the rows of the last build are what the
-- uniqueness test reads (distinct_in_last_build), so it costs a tail, not the table.
-- What the run as a whole decides (its best, first right step, flips) is int_vv_question_runs.
{%- set tails = vv_changed_tails() %}
{%- set own = ['correct_rate', 'majority_correct', 'majority_letter', 'letters',
               'extraction_method', 'k'] %}
WITH rated AS (
    SELECT run_id, step, uid, data_source, k, n_correct, majority_letter, n_majority,
           n_fallback, n_none, letters, part, n_correct / k AS correct_rate,
           coalesce(majority_letter = ground_truth, false) AS majority_correct,
           -- the samples' method when they agree, else `mixed`
           CASE WHEN n_none = k THEN 'none' WHEN n_fallback = k THEN 'fallback'
                WHEN n_none + n_fallback = 0 THEN 'boxed_answer' ELSE 'mixed' END
               AS extraction_method,
           true AS fresh
    FROM {{ ref('stg_vv_question_scores') }}
    WHERE {{ vv_tail_parts(tails) }}
{%- if tails is not none and tails.runs %}
    UNION ALL  -- each question's last row before its run's tail: the first fresh row's prev
    SELECT * FROM (
        SELECT h.run_id, h.step, h.uid, NULL, h.n_samples, NULL, h.majority_letter, NULL, NULL,
               NULL, h.letters, NULL, h.correct_rate, h.majority_correct, h.extraction_method,
               false
        FROM {{ this }} AS h JOIN {{ vv_tails_relation(tails) }}
          ON h.run_id = t.run_id AND h.step < t.from_step
        QUALIFY row_number() OVER (PARTITION BY h.run_id, h.uid ORDER BY h.step DESC) = 1)
{%- endif %}
),
ordered AS (
    SELECT *, lag(step) OVER w AS prev_step,
           {%- for c in own %}
           lag({{ c }}) OVER w AS prev_{{ c }}{{ ',' if not loop.last }}
           {%- endfor %}
    FROM rated
    WINDOW w AS (PARTITION BY run_id, uid ORDER BY step)
)
SELECT run_id, uid, step, data_source, k AS n_samples, n_correct, correct_rate,
       majority_letter, n_majority, n_majority / k AS agreement, letters, n_fallback, n_none,
       extraction_method, majority_correct,
       coalesce(majority_correct <> prev_majority_correct, false) AS flipped,
       prev_step, prev_correct_rate, prev_majority_correct, prev_majority_letter, prev_letters,
       prev_extraction_method, prev_k AS prev_n_samples, part,
       {{ vv_build_seq() }} AS build_seq
FROM ordered
WHERE fresh
