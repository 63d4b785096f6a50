-- Per run, checkpoint and data_source (and 'all'): k (samples per question, max), mean@k,
-- pass@k and majority-vote accuracy over the responded questions; stability over samples: the
-- mean agreement with the majority letter, and the figures lmms-eval 0.7.3 reports for repeated
-- samples (lmms_eval/api/metrics.py): expected_accuracy (every sample's score averaged: the
-- questions weigh by their samples), consistency_rate (share of questions whose samples all
-- score alike) and internal_variance (mean of the per-question sample variances, over the
-- questions with two samples or more; NULL without one). Computed one checkpoint at a
-- time, when its questions arrive (int_vv_checkpoint_scores_at_k).
SELECT run_id, step, data_source, k, n_responded, mean_at_k, pass_at_k, majority_accuracy,
       agreement, expected_accuracy, consistency_rate, internal_variance
FROM {{ ref('int_vv_checkpoint_scores_at_k') }}
ORDER BY run_id, step, data_source
