-- Intermediate: what a question's whole timeline in its run decides, one row per (run_id, uid),
-- kept one run at a time (an incremental table: macros/vv_question_parts.sql,
-- vv_changed_runs), from int_vv_question_steps:
--   best_*              the run's best checkpoint (int_vv_checkpoint_ranks) and the question's
--                       values there (NULL when the best did not answer it);
--   n_steps, first_right_step, n_flips, last_flip_step
--                       over every checkpoint of the run that answered it;
--   parts_digest        the digest of the run's parts these rows were computed from (what
--                       tells a changed run).
-- Policies do not enter: the extracted letter, and so correctness, is the same under every
-- scoring policy (vv_scored_responses), and so is each run's best (ranked by accuracy alone);
-- were two policies ever to rank another best, the run's rows would be doubled and this
-- table's uniqueness test would fail.
WITH steps AS (
    SELECT * FROM {{ ref('int_vv_question_steps') }} WHERE {{ vv_changed_runs_in() }}
),
best AS (SELECT DISTINCT run_id, step AS best_step FROM {{ ref('int_vv_checkpoint_ranks') }}
         WHERE rank = 1)
SELECT s.run_id, s.uid, b.best_step,
       {%- for c in ['correct_rate', 'majority_correct', 'majority_letter', 'letters',
                     'extraction_method', 'n_samples'] %}
       max(s.{{ c }}) FILTER (WHERE s.step = b.best_step) AS best_{{ c }},
       {%- endfor %}
       count(*) AS n_steps,
       min(s.step) FILTER (WHERE s.majority_correct) AS first_right_step,
       count(*) FILTER (WHERE s.flipped) AS n_flips,
       max(s.step) FILTER (WHERE s.flipped) AS last_flip_step,
       d.parts_digest
FROM steps AS s
LEFT JOIN best AS b USING (run_id)
JOIN {{ vv_run_digests('steps') }} AS d USING (run_id)
GROUP BY s.run_id, s.uid, b.best_step, d.parts_digest
