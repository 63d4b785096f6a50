-- Per run, checkpoint and data_source (and 'all'): k (samples per question, max), mean@k,
-- pass@k and majority-vote accuracy over the responded questions. Computed one checkpoint at a
-- time, when its questions arrive (int_vv_checkpoint_scores_at_k).
SELECT run_id, step, data_source, k, n_responded, mean_at_k, pass_at_k, majority_accuracy
FROM {{ ref('int_vv_checkpoint_scores_at_k') }}
ORDER BY run_id, step, data_source
