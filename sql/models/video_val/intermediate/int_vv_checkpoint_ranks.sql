-- Intermediate: per scoring policy and run, every checkpoint's `all` row of vv_scores ranked by
-- its accuracy (1 = best; ties go to the earliest step; a step without an accuracy ranks last).
-- The best and the runner-up of vv_best_checkpoints, and the pairs of vv_run_pairs, come from here.
SELECT *, row_number() OVER (PARTITION BY policy, run_id
                             ORDER BY accuracy DESC NULLS LAST, step) AS rank
FROM {{ ref('vv_scores') }}
WHERE data_source = 'all'
