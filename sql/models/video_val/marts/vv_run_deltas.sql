-- Every run against every other run as base (pick one with WHERE base_run_id = '...'), per
-- scoring policy: kind 'same_step' compares the same checkpoint; kind 'best_vs_best' each
-- run's best checkpoint (vv_best_checkpoints) with the base's best, over data_source 'all'.
SELECT r.policy, 'same_step' AS kind, r.run_id, b.run_id AS base_run_id, r.step,
       b.step AS base_step, r.data_source, r.accuracy, b.accuracy AS base_accuracy,
       r.accuracy - b.accuracy AS delta_accuracy, r.composite - b.composite AS delta_composite
FROM {{ ref('vv_scores') }} AS r
JOIN {{ ref('vv_scores') }} AS b ON b.policy = r.policy AND b.step = r.step
 AND b.data_source = r.data_source AND b.run_id <> r.run_id
UNION ALL
SELECT r.policy, 'best_vs_best', r.run_id, b.run_id, r.best_step, b.best_step, 'all',
       r.accuracy, b.accuracy, r.accuracy - b.accuracy, r.composite - b.composite
FROM {{ ref('vv_best_checkpoints') }} AS r
JOIN {{ ref('vv_best_checkpoints') }} AS b ON b.policy = r.policy AND b.run_id <> r.run_id
ORDER BY policy, kind, base_run_id, run_id, step, data_source
