-- The clustered standard error (macros/statistics.sql) over a table `cluster_inputs(g, c, x)`
-- (group, cluster, value) that tests/warehouse/test_statistics.py creates, to compare it with
-- lmms-eval's clustered_stderr: dbt compiles an analysis into the manifest but never runs it.
SELECT * FROM {{ clustered_stats('cluster_inputs', ['g'], 'c', ['x']) }}
