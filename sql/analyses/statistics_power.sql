-- The power macros (macros/statistics.sql) over a table `power_inputs(g, diff, sd, n)` that
-- tests/warehouse/test_statistics.py creates, to compare them with lmms-eval's power_analysis:
-- the smallest difference detectable with n questions of paired standard deviation sd, and the
-- questions a difference `diff` needs.
SELECT g, {{ mde('sd / sqrt(n)') }} AS mde, {{ questions_needed('diff', 'sd') }} AS questions_needed
FROM power_inputs ORDER BY g
