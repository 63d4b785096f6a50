-- Intermediate: what vv_breakdowns shows, kept one checkpoint at a time (an incremental table:
-- macros/raw_parts.sql; every row of a checkpoint is computed from its questions alone).
-- Accuracy, format rate and composite per scoring policy, run and checkpoint broken down by a
-- question attribute: task, category, question_type (Video-MME's duration class), subject. Only
-- questions carrying that attribute count; n_rows / n_responded are shown per value.
-- Error bars as in vv_scores: clustered by video, t interval clipped to 0-1.
WITH attrs AS (
    SELECT uid, data_source, dimension, value
    FROM (UNPIVOT (SELECT uid, data_source, task, category, question_type, subject
                   FROM {{ ref('stg_vv_questions') }})
          ON task, category, question_type, subject INTO NAME dimension VALUE value)
    WHERE value IS NOT NULL
),
-- the questions of each value, responded or not: n_rows of every checkpoint
values_n AS (SELECT data_source, dimension, value, count(*) AS n_rows FROM attrs GROUP BY ALL),
scores AS MATERIALIZED (
    SELECT * FROM {{ ref('int_vv_row_scores') }} WHERE {{ new_parts('vv_question_scores') }}
),
checkpoints AS (SELECT DISTINCT policy, run_id, step, part FROM scores),
-- the responded questions only (each probes the small attribute table): an unresponded one adds
-- nothing to a mean or a cluster, and n_rows comes from values_n
rows AS MATERIALIZED (
    SELECT r.policy, r.run_id, r.step, a.data_source, a.dimension, a.value, r.uid, r.video,
           r.accuracy, r.format_rate, r.composite
    FROM scores AS r
    JOIN attrs AS a USING (uid)
),
errors AS (
    SELECT * FROM {{ clustered_stats('rows',
                                     ['policy', 'run_id', 'step', 'data_source', 'dimension',
                                      'value'], 'hash(video)', ['accuracy', 'composite']) }}
),
means AS (
    SELECT policy, run_id, step, data_source, dimension, value, count(uid) AS n_responded,
           {{ exact_mean('accuracy') }} AS accuracy,
           {{ exact_mean('format_rate') }} AS format_rate,
           {{ exact_mean('composite') }} AS composite
    FROM rows GROUP BY ALL
),
-- every value of every checkpoint, responded or not
grid AS (SELECT * FROM checkpoints CROSS JOIN values_n)
SELECT g.policy, g.run_id, g.step, g.data_source, g.dimension, g.value, g.n_rows,
       coalesce(m.n_responded, 0) AS n_responded, m.accuracy, m.format_rate, m.composite,
       e.accuracy_se,
       {{ interval('accuracy', 'm.accuracy', 'e.accuracy_se', 'e.accuracy_clusters - 1', 0, 1) }},
       e.composite_se,
       {{ interval('composite', 'm.composite', 'e.composite_se', 'e.composite_clusters - 1',
                   0, 1) }},
       'clustered:video' AS se_method, g.part
FROM grid AS g
LEFT JOIN means AS m USING (policy, run_id, step, data_source, dimension, value)
LEFT JOIN errors AS e USING (policy, run_id, step, data_source, dimension, value)
