-- Per scoring policy and run, the checkpoint with the highest accuracy over data_source 'all'
-- (ties go to the earliest step).
SELECT policy, run_id, step AS best_step, accuracy, format_rate, composite, n_responded, n_rows
FROM (
    SELECT *, row_number() OVER (PARTITION BY policy, run_id
                                 ORDER BY accuracy DESC NULLS LAST, step) AS rn
    FROM {{ ref('vv_scores') }} WHERE data_source = 'all'
)
WHERE rn = 1
ORDER BY policy, run_id
