-- Per scoring policy, run, checkpoint (step) and data_source: accuracy, format rate and
-- composite over the responded questions, with n_responded and n_rows (the source's questions)
-- always shown.
-- data_source 'all' is the micro-average over every responded row of every source; 'macro' is
-- the plain mean of the sources' values. The per-question rows are computed once (MATERIALIZED).
WITH rows AS MATERIALIZED (SELECT * FROM {{ ref('int_vv_row_scores') }}),
sources AS (
    SELECT data_source, count(*) AS n_rows FROM {{ ref('stg_vv_questions') }} GROUP BY 1
),
checkpoints AS (SELECT DISTINCT policy, run_id, step FROM rows),
by_source AS (
    SELECT c.policy, c.run_id, c.step, s.data_source, s.n_rows, count(r.uid) AS n_responded,
           avg(r.accuracy) AS accuracy, avg(r.format_rate) AS format_rate,
           avg(r.composite) AS composite
    FROM checkpoints AS c
    CROSS JOIN sources AS s
    LEFT JOIN rows AS r
           ON r.policy = c.policy AND r.run_id = c.run_id AND r.step = c.step
          AND r.data_source = s.data_source
    GROUP BY c.policy, c.run_id, c.step, s.data_source, s.n_rows
),
micro AS (
    SELECT c.policy, c.run_id, c.step, 'all' AS data_source,
           (SELECT sum(n_rows) FROM sources) AS n_rows,
           count(r.uid) AS n_responded, avg(r.accuracy) AS accuracy,
           avg(r.format_rate) AS format_rate, avg(r.composite) AS composite
    FROM checkpoints AS c
    LEFT JOIN rows AS r
           ON r.policy = c.policy AND r.run_id = c.run_id AND r.step = c.step
    GROUP BY c.policy, c.run_id, c.step
),
macro AS (
    SELECT policy, run_id, step, 'macro' AS data_source, sum(n_rows) AS n_rows,
           sum(n_responded) AS n_responded, avg(accuracy) AS accuracy,
           avg(format_rate) AS format_rate, avg(composite) AS composite
    FROM by_source GROUP BY policy, run_id, step
)
SELECT policy, run_id, step, data_source, n_rows, n_responded, accuracy, format_rate, composite
FROM (SELECT * FROM by_source UNION ALL SELECT * FROM micro UNION ALL SELECT * FROM macro)
ORDER BY policy, run_id, step, data_source
