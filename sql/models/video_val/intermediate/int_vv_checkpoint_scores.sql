-- Intermediate: what vv_scores shows, kept one checkpoint at a time (an incremental table:
-- macros/raw_parts.sql; every row of a checkpoint is computed from its questions alone).
-- Per scoring policy, run, checkpoint (step) and data_source: accuracy, format rate and
-- composite over the responded questions, with n_responded and n_rows (the source's questions)
-- always shown.
-- data_source 'all' is the micro-average over every responded row of every source; 'macro' is
-- the plain mean of the sources' values. The per-question rows are computed once (MATERIALIZED).
-- Error bars: the clustered standard error of the mean over questions (clusters: the question's
-- video; macros/statistics.sql) and mean -/+ t(0.975, videos - 1) SE, clipped to 0-1. The
-- 'macro' SE is sqrt(sum SE_s^2) / sources (independent sources), its t degrees of freedom
-- Welch-Satterthwaite's, rounded down.
WITH questions AS MATERIALIZED (
    SELECT policy, run_id, step, part, data_source, hash(video) AS video_key, accuracy,
           format_rate, composite
    FROM {{ ref('int_vv_row_scores') }}
    WHERE {{ new_parts('vv_question_scores') }}
),
rows AS (
    SELECT *, data_source AS scope FROM questions
    UNION ALL
    SELECT *, 'all' AS scope FROM questions
),
-- one pass: counts, means and clustered standard errors per checkpoint and scope
stats AS (
    SELECT * FROM {{ clustered_stats('rows', ['policy', 'run_id', 'step', 'scope'], 'video_key',
                                     ['accuracy', 'format_rate', 'composite']) }}
),
sources AS (
    SELECT data_source, count(*) AS n_rows FROM {{ ref('stg_vv_questions') }} GROUP BY 1
    UNION ALL
    SELECT 'all', count(*) FROM {{ ref('stg_vv_questions') }}
),
checkpoints AS (SELECT DISTINCT policy, run_id, step, part FROM questions),
with_errors AS (
    SELECT c.policy, c.run_id, c.step, c.part, s.data_source, s.n_rows,
           coalesce(e.accuracy_n, 0) AS n_responded, e.accuracy_mean AS accuracy,
           e.format_rate_mean AS format_rate, e.composite_mean AS composite,
           e.accuracy_se, e.composite_se,
           e.accuracy_clusters - 1 AS accuracy_df, e.composite_clusters - 1 AS composite_df
    FROM checkpoints AS c
    CROSS JOIN sources AS s
    LEFT JOIN stats AS e
           ON e.policy = c.policy AND e.run_id = c.run_id AND e.step = c.step
          AND e.scope = s.data_source
),
macro AS (
    -- a source without a standard error (or a single video) leaves the macro row without one
    SELECT policy, run_id, step, any_value(part) AS part, 'macro' AS data_source,
           sum(n_rows) AS n_rows,
           sum(n_responded) AS n_responded, avg(accuracy ORDER BY accuracy) AS accuracy,
           avg(format_rate ORDER BY format_rate) AS format_rate,
           avg(composite ORDER BY composite) AS composite,
           {%- for m in ['accuracy', 'composite'] %}
           CASE WHEN count({{ m }}_se) = count(*) AND min({{ m }}_df) >= 1 THEN
               sqrt(sum({{ m }}_se ^ 2 ORDER BY {{ m }}_se)) / count(*) END AS {{ m }}_se,
           -- every SE 0: 0/0, no df (the interval is then the point itself)
           CASE WHEN count({{ m }}_se) = count(*) AND min({{ m }}_df) >= 1 THEN
               {{ finite_or_null('floor(sum(' ~ m ~ '_se ^ 2 ORDER BY ' ~ m ~ '_se) ^ 2 / sum('
                                 ~ m ~ '_se ^ 4 / ' ~ m ~ '_df ORDER BY ' ~ m ~ '_se ^ 4 / '
                                 ~ m ~ '_df))') }} END
               AS {{ m }}_df{{ ',' if not loop.last }}
           {%- endfor %}
    FROM with_errors WHERE data_source <> 'all' GROUP BY policy, run_id, step
)
SELECT policy, run_id, step, data_source, n_rows, n_responded, accuracy, format_rate, composite,
       accuracy_se, {{ interval('accuracy', 'accuracy', 'accuracy_se', 'accuracy_df', 0, 1) }},
       composite_se, {{ interval('composite', 'composite', 'composite_se', 'composite_df', 0, 1) }},
       'clustered:video' AS se_method, part
FROM (SELECT * FROM with_errors UNION ALL BY NAME SELECT * FROM macro)
