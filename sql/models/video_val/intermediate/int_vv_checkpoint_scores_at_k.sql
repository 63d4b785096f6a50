-- Per run, checkpoint and data_source (and 'all'): k (samples per question, max), mean@k,
-- pass@k and majority-vote accuracy over the responded questions.
SELECT run_id, step, data_source, max(k) AS k, count(*) AS n_responded,
       avg(mean_at_k) AS mean_at_k, avg(CAST(pass_at_k AS DOUBLE)) AS pass_at_k,
       avg(CAST(majority_correct AS DOUBLE)) AS majority_accuracy
FROM {{ ref('vv_sample_metrics') }} GROUP BY run_id, step, data_source
UNION ALL
SELECT run_id, step, 'all', max(k), count(*), avg(mean_at_k), avg(CAST(pass_at_k AS DOUBLE)),
       avg(CAST(majority_correct AS DOUBLE))
FROM {{ ref('vv_sample_metrics') }} GROUP BY run_id, step
ORDER BY run_id, step, data_source
