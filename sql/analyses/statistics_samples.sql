-- lmms-eval's figures for repeated samples (macros/statistics.sql) over a table
-- `sample_inputs(g, c, n)` (group, correct samples, samples of one question) that
-- tests/warehouse/test_statistics.py creates, to compare them with lmms-eval's functions.
SELECT g, {{ expected_accuracy('c', 'n') }} AS expected_accuracy,
       {{ consistency_rate('c', 'n') }} AS consistency_rate,
       {{ internal_variance('c', 'n') }} AS internal_variance
FROM sample_inputs GROUP BY g ORDER BY g
