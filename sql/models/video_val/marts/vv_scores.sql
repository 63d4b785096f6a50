-- Per scoring policy, run, checkpoint (step) and data_source: accuracy, format rate and
-- composite over the responded questions, with n_responded and n_rows (the source's questions)
-- always shown. data_source 'all' is the micro-average over every responded row of every
-- source; 'macro' is the plain mean of the sources' values. Error bars: the clustered standard
-- error over questions (clusters: the question's video) and its t interval. Computed one
-- checkpoint at a time, when its questions arrive: int_vv_checkpoint_scores says how.
SELECT policy, run_id, step, data_source, n_rows, n_responded, accuracy, format_rate, composite,
       accuracy_se, accuracy_ci_low, accuracy_ci_high, composite_se, composite_ci_low,
       composite_ci_high, se_method
FROM {{ ref('int_vv_checkpoint_scores') }}
ORDER BY policy, run_id, step, data_source
