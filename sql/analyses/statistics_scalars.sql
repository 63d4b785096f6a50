-- The scalar statistics macros (macros/statistics.sql) over rows of a table
-- `macro_inputs(t, df, k, n, draw, n_items)` that tests/warehouse/test_statistics.py creates, to
-- compare them with scipy: dbt compiles an analysis into the manifest but never runs it.
SELECT i.*, {{ t975('i.df') }} AS t975,
       {{ t_two_sided_p('i.t', 'i.df') }} AS t_p,
       {{ binom_half_two_sided_p('i.k', 'i.n') }} AS binom_p,
       {{ bootstrap_indices('i.draw', 'i.n_items', var('bootstrap_seed')) }} AS indices
FROM macro_inputs AS i
