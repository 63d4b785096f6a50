-- With several samples per question: mean@k (share of correct samples), pass@k (any sample
-- correct) and the per-question majority vote over the extracted letters (samples with no
-- extraction do not vote; a tie goes to the alphabetically first letter).
WITH votes AS (
    SELECT run_id, step, uid, data_source, extracted, count(*) AS n
    FROM {{ ref('int_vv_accepted_scores') }} WHERE extracted IS NOT NULL GROUP BY ALL
),
majority AS (
    SELECT run_id, step, uid, arg_max(extracted, n * 1000 - ascii(extracted)) AS majority_letter
    FROM votes GROUP BY ALL
)
SELECT s.run_id, s.step, s.uid, s.data_source, count(*) AS k,
       avg(CAST(s.correct AS DOUBLE)) AS mean_at_k, bool_or(s.correct) AS pass_at_k,
       m.majority_letter, coalesce(m.majority_letter = any_value(s.ground_truth), false)
           AS majority_correct
FROM {{ ref('int_vv_accepted_scores') }} AS s
LEFT JOIN majority AS m USING (run_id, step, uid)
GROUP BY s.run_id, s.step, s.uid, s.data_source, m.majority_letter
