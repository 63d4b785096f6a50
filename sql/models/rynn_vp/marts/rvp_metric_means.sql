-- Mean of every metric (diagnostics included) over the final accepted judgments, per judge run,
-- system and modality, with the number of judgments carrying it. Aggregated first, then turned
-- into one row per metric. No metric is named: rvp_metric_columns() expands to the metric
-- columns of the seed rvp_metrics (AS "\1" keeps each one's name), which also names each metric,
-- so a new metric appears here as is.
{%- set metric_columns = rvp_metric_columns() %}
WITH agg AS (
    SELECT judge_run_id, system, input_modality AS modality,
           {'n': count({{ metric_columns }}),
            'mean': avg({{ metric_columns }} ORDER BY {{ metric_columns }}),
            'min': min({{ metric_columns }}), 'max': max({{ metric_columns }})} AS "\1"
    FROM {{ ref('stg_rvp_judgments') }}
    WHERE is_final
    GROUP BY judge_run_id, system, input_modality
)
SELECT u.judge_run_id, u.system, u.modality, m.metric, u.s.n AS n_scored, u.s.mean, u.s.min,
       u.s.max
FROM (UNPIVOT agg ON {{ metric_columns }} INTO NAME metric_column VALUE s) AS u
JOIN {{ ref('rvp_metrics') }} AS m ON m."column" = u.metric_column
WHERE u.s.n > 0
ORDER BY judge_run_id, system, modality, metric
