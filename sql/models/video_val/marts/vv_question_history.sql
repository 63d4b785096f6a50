-- One row per scoring policy, run, question and checkpoint: the question's correctness at that
-- step (correct_rate, the mean over its samples), and over its run the step it was first right,
-- its number of flips and the last one (int_vv_question_history says how each is decided),
-- with what to filter on: data_source, task, category, question_type (Video-MME's duration
-- class), duration_bucket, extraction_method (`none` and `mixed` included).
-- The policy column repeats the same rows under each policy: correctness does not depend on it
-- (only format_ok and composite do), so a filter on one policy reads each row once.
-- duration_bucket cuts the probed video duration at Video-MME's classes (short < 2 min, medium
-- 4-15 min, long 30-60 min): `short` below 2 min, `medium` below 15 min, `long` from 15 min,
-- `unknown` for a video that was not probed (unresolved or undecodable).
SELECT p.policy, h.run_id, h.uid, h.step, h.n_samples, h.correct_rate, h.n_correct,
       h.majority_letter, h.majority_correct, h.n_majority, h.agreement, h.letters,
       h.extraction_method, h.n_fallback, h.n_none, h.prev_step, h.prev_correct_rate,
       h.flipped, h.n_steps, h.first_right_step, h.n_flips, h.last_flip_step, h.best_step,
       h.data_source, q.ground_truth, q.task, q.category, q.question_type,
       coalesce(q.video_uri, h.uid) AS video, v.duration_s,
       CASE WHEN v.duration_s IS NULL THEN 'unknown' WHEN v.duration_s < 120 THEN 'short'
            WHEN v.duration_s < 900 THEN 'medium' ELSE 'long' END AS duration_bucket
FROM {{ ref('int_vv_question_history') }} AS h
CROSS JOIN (SELECT policy FROM {{ ref('vv_scoring_policies') }}) AS p
LEFT JOIN {{ ref('stg_vv_questions') }} AS q ON q.uid = h.uid
LEFT JOIN {{ ref('stg_vv_videos') }} AS v ON v.video_path = q.video_path AND v.ok
