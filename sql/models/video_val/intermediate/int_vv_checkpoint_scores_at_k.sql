-- Intermediate: what vv_scores_at_k shows, kept one checkpoint at a time (an incremental table:
-- macros/vv_question_parts.sql). Per run, checkpoint and data_source (and 'all'): k (samples
-- per question, max), mean@k, pass@k and majority-vote accuracy over the responded questions.
WITH metrics AS MATERIALIZED (
    SELECT * FROM {{ ref('vv_sample_metrics') }} WHERE {{ vv_new_parts() }}
)
SELECT run_id, step, data_source, max(k) AS k, count(*) AS n_responded,
       avg(mean_at_k) AS mean_at_k, avg(CAST(pass_at_k AS DOUBLE)) AS pass_at_k,
       avg(CAST(majority_correct AS DOUBLE)) AS majority_accuracy, part
FROM metrics GROUP BY run_id, step, part, data_source
UNION ALL
SELECT run_id, step, 'all', max(k), count(*), avg(mean_at_k), avg(CAST(pass_at_k AS DOUBLE)),
       avg(CAST(majority_correct AS DOUBLE)), part
FROM metrics GROUP BY run_id, step, part
