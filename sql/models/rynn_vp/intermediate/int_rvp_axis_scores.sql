-- Intermediate: PI, VR and VQ of every final accepted judgment under every profile. Each axis is
-- the sum of value x weight over the metrics the profile weights on that axis: the judgments'
-- metric columns (those of the seed rvp_metrics, macro rvp_metric_columns) become rows and are
-- joined with the weight rows (int_rvp_weight_vectors, the PI-5 set when the case has an explicit
-- plan), so no metric is named here: a new metric is a row of rvp_metrics, its column and its
-- rows in rvp_metric_weights.
WITH finals AS MATERIALIZED (
    -- a number per final judgment, so the unpivoted rows are joined and grouped by one integer
    -- instead of three strings (about twice as fast at 60,000 judgments); it lives only here
    SELECT row_number() OVER () AS judgment_no, judge_run_id, system, case_id,
           has_explicit_plan, {{ rvp_metric_columns() }}
    FROM {{ ref('stg_rvp_judgments') }}
    WHERE is_final
),
metric_values AS (
    -- one row per (judgment, metric); a metric the record lacks keeps its row, value NULL
    SELECT judgment_no, has_explicit_plan, metric_column, value
    FROM finals
    UNPIVOT INCLUDE NULLS (value FOR metric_column IN ({{ rvp_metric_columns() }}))
),
axis_sums AS (
    -- A weighted metric missing from the record makes its axis NULL, as value x weight would:
    -- it enters the sum as NaN (scores are validated numbers in 0-100, never NaN), which
    -- survives any summation order and is turned back into NULL. An axis without a weighted
    -- metric is 0. Weight-0 rows are left out of the join: diagnostics (PI-6, VQ-D*) never
    -- count, and a missing one never nulls an axis. Summed in metric order: the same bits
    -- whatever order the rows come in (macros/statistics.sql).
    SELECT w.profile, m.judgment_no,
           nullif(coalesce(sum(coalesce(m.value, 'NaN'::DOUBLE) * w.weight
                               ORDER BY w.metric_column)
                           FILTER (WHERE w.axis = 'PI'), 0), 'NaN'::DOUBLE) AS pi,
           nullif(coalesce(sum(coalesce(m.value, 'NaN'::DOUBLE) * w.weight
                               ORDER BY w.metric_column)
                           FILTER (WHERE w.axis = 'VR'), 0), 'NaN'::DOUBLE) AS vr,
           nullif(coalesce(sum(coalesce(m.value, 'NaN'::DOUBLE) * w.weight
                               ORDER BY w.metric_column)
                           FILTER (WHERE w.axis = 'VQ'), 0), 'NaN'::DOUBLE) AS vq
    FROM metric_values AS m
    JOIN {{ ref('int_rvp_weight_vectors') }} AS w
      ON w.has_explicit_plan = m.has_explicit_plan AND w.metric_column = m.metric_column
     AND w.weight <> 0
    GROUP BY w.profile, m.judgment_no
)
SELECT s.profile, f.judge_run_id, f.system, f.case_id, f.has_explicit_plan, s.pi, s.vr, s.vq
FROM axis_sums AS s
JOIN finals AS f USING (judgment_no)
