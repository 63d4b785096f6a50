-- Intermediate: what vv_flips lists, before the policy column and the question's attributes:
-- every checkpoint against the question's previous checkpoint in its run (vs_previous) and
-- against its run's best checkpoint (vs_best; a row that is both has both flags), the rows with
-- delta = correct_rate - base_correct_rate <> 0 (a mean over samples each: with one sample, +1
-- is wrong -> right and -1 right -> wrong). With several samples a change of the rate need not
-- change the verdict: `flipped` says whether majority_correct changed (what
-- vv_question_history counts as a flip).
-- Both sides are columns of int_vv_question_history's row (its prev_* and best_*), so this
-- scans the question rows twice, once per comparison, and never joins them with themselves
-- (read twice from a CTE, they would be copied whole first).
{%- set own = 'run_id, uid, step, data_source, correct_rate, majority_correct, majority_letter, '
              ~ 'letters, extraction_method, n_samples' %}
WITH sides AS (
    SELECT {{ own }}, prev_step AS base_step, true AS vs_previous,
           prev_step = best_step AS vs_best, prev_correct_rate AS base_correct_rate,
           prev_majority_correct AS base_majority_correct,
           prev_majority_letter AS base_majority_letter, prev_letters AS base_letters,
           prev_extraction_method AS base_extraction_method,
           prev_n_samples AS base_n_samples
    FROM {{ ref('int_vv_question_history') }}
    WHERE correct_rate <> prev_correct_rate
    UNION ALL  -- the best as the previous checkpoint is a row above already
    SELECT {{ own }}, best_step, false, true, best_correct_rate, best_majority_correct,
           best_majority_letter, best_letters, best_extraction_method, best_n_samples
    FROM {{ ref('int_vv_question_history') }}
    WHERE correct_rate <> best_correct_rate AND prev_step IS DISTINCT FROM best_step
)
SELECT run_id, step, base_step, uid, correct_rate, base_correct_rate,
       correct_rate - base_correct_rate AS delta,
       CASE WHEN correct_rate > base_correct_rate THEN 'gain' ELSE 'loss' END AS direction,
       vs_previous, vs_best, majority_correct, base_majority_correct,
       majority_correct <> base_majority_correct AS flipped,
       majority_letter, base_majority_letter, letters, base_letters,
       extraction_method, base_extraction_method, n_samples, base_n_samples, data_source
FROM sides
