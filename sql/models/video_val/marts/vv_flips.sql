-- The questions whose correctness changed between two checkpoints of a run, per scoring policy:
-- every checkpoint against the question's previous checkpoint in its run (vs_previous) and
-- against its run's best checkpoint (vs_best, the best of vv_best_checkpoints under the policy;
-- a row that is both has both flags). Only rows with delta <> 0, delta = correct_rate -
-- base_correct_rate (a mean over samples each: with one sample, +1 is wrong -> right and -1
-- right -> wrong). With several samples a change of the rate need not change the verdict:
-- `flipped` says whether majority_correct changed (what vv_question_history counts as a flip).
-- Both sides' letters are here (majority_letter, letters); the responses themselves are in
-- vv_responses (join on run_id, step, uid, and base_run_id, base_step, uid: see the YAML).
-- Two runs at any chosen steps: the same difference over vv_question_history (README, "Per
-- question").
WITH history AS (SELECT * FROM {{ ref('int_vv_question_history') }}),
best AS (
    SELECT policy, run_id, step AS best_step FROM {{ ref('int_vv_checkpoint_ranks') }}
    WHERE rank = 1
),
best_rows AS MATERIALIZED (
    SELECT b.policy, h.run_id, h.uid, h.step, h.correct_rate
    FROM best AS b JOIN history AS h ON h.run_id = b.run_id AND h.step = b.best_step
),
vs_previous AS (
    SELECT b.policy, h.run_id, h.uid, h.step, h.prev_step AS base_step, true AS vs_previous,
           h.prev_step = b.best_step AS vs_best
    FROM history AS h
    JOIN best AS b ON b.run_id = h.run_id
    WHERE h.prev_step IS NOT NULL AND h.correct_rate <> h.prev_correct_rate
),
vs_best AS (  -- the best as the previous checkpoint is a vs_previous row already
    SELECT r.policy, h.run_id, h.uid, h.step, r.step AS base_step, false AS vs_previous,
           true AS vs_best
    FROM history AS h
    JOIN best_rows AS r ON r.run_id = h.run_id AND r.uid = h.uid
    WHERE h.step <> r.step AND h.correct_rate <> r.correct_rate
      AND h.prev_step IS DISTINCT FROM r.step
),
pairs AS (SELECT * FROM vs_previous UNION ALL SELECT * FROM vs_best)
SELECT p.policy, p.run_id, p.step, p.run_id AS base_run_id, p.base_step, p.uid,
       a.correct_rate, b.correct_rate AS base_correct_rate,
       a.correct_rate - b.correct_rate AS delta,
       CASE WHEN a.correct_rate > b.correct_rate THEN 'gain' ELSE 'loss' END AS direction,
       p.vs_previous, p.vs_best,
       a.majority_correct, b.majority_correct AS base_majority_correct,
       a.majority_correct <> b.majority_correct AS flipped,
       a.majority_letter, b.majority_letter AS base_majority_letter,
       a.letters, b.letters AS base_letters,
       a.extraction_method, b.extraction_method AS base_extraction_method,
       a.n_samples, b.n_samples AS base_n_samples,
       a.data_source, q.ground_truth, q.task, q.category, coalesce(q.video_uri, p.uid) AS video
FROM pairs AS p
JOIN history AS a ON a.run_id = p.run_id AND a.uid = p.uid AND a.step = p.step
JOIN history AS b ON b.run_id = p.run_id AND b.uid = p.uid AND b.step = p.base_step
LEFT JOIN {{ ref('stg_vv_questions') }} AS q ON q.uid = p.uid
