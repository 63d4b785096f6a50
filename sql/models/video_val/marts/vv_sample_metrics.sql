-- With several samples per question: mean@k (share of correct samples), pass@k (any sample
-- correct) and the per-question majority vote over the extracted letters (samples with no
-- extraction do not vote; a tie goes to the alphabetically first letter), from the samples
-- counted per question when its checkpoint's responses arrived (stg_vv_question_scores).
-- agreement: the share of the samples that gave the majority letter (stability over samples;
-- vv_scores_at_k has lmms-eval's per-checkpoint figures of it).
SELECT run_id, step, uid, data_source, k, n_correct / k AS mean_at_k, n_correct > 0 AS pass_at_k,
       majority_letter, coalesce(majority_letter = ground_truth, false) AS majority_correct,
       n_majority / k AS agreement, n_correct, part
FROM {{ ref('stg_vv_question_scores') }}
