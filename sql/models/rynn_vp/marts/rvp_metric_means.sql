-- Mean of every metric (diagnostics included) over the final accepted judgments, per judge run,
-- system and modality, with the number of judgments carrying it. Aggregated first, then turned
-- into one row per metric. No metric is named: rvp_metric_columns() expands to every metric
-- column of the judgments (AS "\1" keeps each one's name), so a new metric appears here as is.
WITH agg AS (
    SELECT judge_run_id, system, input_modality AS modality,
           {'n': count({{ rvp_metric_columns() }}), 'mean': avg({{ rvp_metric_columns() }}),
            'min': min({{ rvp_metric_columns() }}), 'max': max({{ rvp_metric_columns() }})} AS "\1"
    FROM {{ ref('stg_rvp_judgments') }}
    WHERE is_final
    GROUP BY judge_run_id, system, input_modality
)
SELECT judge_run_id, system, modality, upper(replace(metric_column, '_', '-')) AS metric,
       s.n AS n_scored, s.mean, s.min, s.max
FROM (UNPIVOT agg ON {{ rvp_metric_columns() }} INTO NAME metric_column VALUE s)
WHERE s.n > 0
ORDER BY judge_run_id, system, modality, metric
