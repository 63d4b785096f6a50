-- Accuracy, format rate and composite per scoring policy, run and checkpoint broken down by a
-- question attribute: task, category, question_type (Video-MME's duration class), subject. Only
-- questions carrying that attribute count; n_rows / n_responded are shown per value.
WITH attrs AS (
    SELECT uid, data_source, dimension, value
    FROM (UNPIVOT (SELECT uid, data_source, task, category, question_type, subject
                   FROM {{ ref('stg_vv_questions') }})
          ON task, category, question_type, subject INTO NAME dimension VALUE value)
    WHERE value IS NOT NULL
),
checkpoints AS (SELECT DISTINCT policy, run_id, step FROM {{ ref('int_vv_row_scores') }})
SELECT c.policy, c.run_id, c.step, a.data_source, a.dimension, a.value,
       count(*) AS n_rows, count(r.uid) AS n_responded, avg(r.accuracy) AS accuracy,
       avg(r.format_rate) AS format_rate, avg(r.composite) AS composite
FROM checkpoints AS c
CROSS JOIN attrs AS a
LEFT JOIN {{ ref('int_vv_row_scores') }} AS r
       ON r.policy = c.policy AND r.run_id = c.run_id AND r.step = c.step AND r.uid = a.uid
GROUP BY ALL
ORDER BY c.policy, c.run_id, c.step, a.data_source, a.dimension, a.value
