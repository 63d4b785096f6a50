-- Intermediate: what vv_scores_at_k shows, kept one checkpoint at a time (an incremental table:
-- macros/raw_parts.sql). Per run, checkpoint and data_source (and 'all'): k (samples
-- per question, max), mean@k, pass@k and majority-vote accuracy over the responded questions;
-- the stability over samples: the mean agreement with the majority letter, and lmms-eval
-- 0.7.3's expected_accuracy, consistency_rate and internal_variance (macros/statistics.sql).
WITH metrics AS MATERIALIZED (
    SELECT * FROM {{ ref('vv_sample_metrics') }} WHERE {{ new_parts('vv_question_scores') }}
)
{%- set figures -%}
max(k) AS k, count(*) AS n_responded, {{ exact_mean('mean_at_k') }} AS mean_at_k,
       avg(CAST(pass_at_k AS DOUBLE)) AS pass_at_k,
       avg(CAST(majority_correct AS DOUBLE)) AS majority_accuracy,
       {{ exact_mean('agreement') }} AS agreement,
       {{ expected_accuracy('n_correct', 'k') }} AS expected_accuracy,
       {{ consistency_rate('n_correct', 'k') }} AS consistency_rate,
       {{ internal_variance('n_correct', 'k') }} AS internal_variance
{%- endset %}
SELECT run_id, step, data_source, {{ figures }}, part
FROM metrics GROUP BY run_id, step, part, data_source
UNION ALL
SELECT run_id, step, 'all', {{ figures }}, part
FROM metrics GROUP BY run_id, step, part
