-- The questions whose correctness changed between two checkpoints of a run, per scoring policy:
-- every checkpoint against the question's previous checkpoint in its run (vs_previous) and
-- against its run's best checkpoint (vs_best, vv_best_checkpoints' best), only rows with
-- delta <> 0; `flipped` when the verdict (majority_correct) changed too. int_vv_flips says how
-- each is decided; this adds the policy (the rows are the same under every policy: correctness
-- and the best do not depend on it) and the question's attributes.
-- Both sides' letters are here (majority_letter, letters); the responses themselves are in
-- vv_responses (join on run_id, step, uid, and base_run_id, base_step, uid: see the YAML).
-- Two runs at any chosen steps: the same difference over vv_question_history (README, "Per
-- question").
SELECT pol.policy, f.run_id, f.step, f.run_id AS base_run_id, f.base_step, f.uid,
       f.correct_rate, f.base_correct_rate, f.delta, f.direction, f.vs_previous, f.vs_best,
       f.majority_correct, f.base_majority_correct, f.flipped,
       f.majority_letter, f.base_majority_letter, f.letters, f.base_letters,
       f.extraction_method, f.base_extraction_method, f.n_samples, f.base_n_samples,
       f.data_source, q.ground_truth, q.task, q.category, coalesce(q.video_uri, f.uid) AS video
FROM {{ ref('int_vv_flips') }} AS f
CROSS JOIN (SELECT policy FROM {{ ref('vv_scoring_policies') }}) AS pol
LEFT JOIN {{ ref('stg_vv_questions') }} AS q ON q.uid = f.uid
