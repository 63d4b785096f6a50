-- Intermediate: the metrics of every final accepted judgment, one row per (judgment, metric).
-- The metric columns of the judgments table (pi_1 ... vq_d7, whichever it carries) become rows,
-- so scoring joins the weight rows and sums by axis instead of naming columns: a new metric is a
-- new column of the judgments table plus its rows in rvp_metric_weights, no SQL edit.
-- A metric the record does not carry keeps its row with a NULL value (INCLUDE NULLS): scoring
-- must see it, because a weighted metric that is missing leaves its axis NULL, never 0.
WITH finals AS (
    SELECT judge_run_id, system, case_id, input_modality, has_explicit_plan,
           {{ rvp_metric_columns() }}
    FROM {{ ref('stg_rvp_judgments') }}
    WHERE is_final
)
SELECT judge_run_id, system, case_id, input_modality, has_explicit_plan, metric_column,
       upper(replace(metric_column, '_', '-')) AS metric,
       value
FROM finals
UNPIVOT INCLUDE NULLS (value FOR metric_column IN ({{ rvp_metric_columns() }}))
