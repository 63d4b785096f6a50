-- Accuracy, format rate and composite per scoring policy, run and checkpoint broken down by a
-- question attribute: task, category, question_type (Video-MME's duration class), subject. Only
-- questions carrying that attribute count; n_rows / n_responded are shown per value.
-- Error bars as in vv_scores: clustered by video, t interval clipped to 0-1. Computed one
-- checkpoint at a time, when its questions arrive: int_vv_checkpoint_breakdowns says how.
SELECT policy, run_id, step, data_source, dimension, value, n_rows, n_responded, accuracy,
       format_rate, composite, accuracy_se, accuracy_ci_low, accuracy_ci_high, composite_se,
       composite_ci_low, composite_ci_high, se_method
FROM {{ ref('int_vv_checkpoint_breakdowns') }}
ORDER BY policy, run_id, step, data_source, dimension, value
