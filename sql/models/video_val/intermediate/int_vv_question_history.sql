-- Intermediate: every question's timeline within its run, one row per (run_id, uid, step):
-- its values at the checkpoint and the previous one's (int_vv_question_steps, kept one run's
-- tail at a time) beside what its whole run decides (int_vv_question_runs, kept one run at a
-- time: the run's best and the question's values there, its first right step and flips).
-- The comparisons vv_flips lists are these columns side by side: no join of the campaign's
-- question rows with themselves when it is read. vv_question_history adds the policy column.
SELECT s.run_id, s.uid, s.step, s.data_source, s.n_samples, s.n_correct, s.correct_rate,
       s.majority_letter, s.n_majority, s.agreement, s.letters, s.n_fallback, s.n_none,
       s.extraction_method, s.majority_correct, s.flipped,
       s.prev_step, s.prev_correct_rate, s.prev_majority_correct, s.prev_majority_letter,
       s.prev_letters, s.prev_extraction_method, s.prev_n_samples,
       r.best_step, r.best_correct_rate, r.best_majority_correct, r.best_majority_letter,
       r.best_letters, r.best_extraction_method, r.best_n_samples,
       r.n_steps, r.first_right_step, r.n_flips, r.last_flip_step, s.part
FROM {{ ref('int_vv_question_steps') }} AS s
JOIN {{ ref('int_vv_question_runs') }} AS r USING (run_id, uid)
