-- Accepted judgment records, one row per attempt. `is_final` marks the attempt that counts per
-- (system, case, judge run): a manager review wins, else the highest attempt; the others stay
-- for audit. Metric columns are null when the record does not carry that metric; they are the
-- columns the seed rvp_metrics lists (macro rvp_metric_columns), so a new metric appears without
-- an edit.
SELECT system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind, is_final,
       source_file, file_version, line,
       -- every metric column (pi_1 ... pi_6, vr_1 ... vr_8, vq, vq_d1 ... vq_d7 today), in order
       {{ rvp_metric_columns() }},
       n_hallucinations, evidence, has_explicit_plan, input_modality, judge_model,
       judge_reasoning, prompt_version, candidate_scope, context_sharing, record_sha256,
       -- a manager review says who decided and why (NULL for a judge's own record)
       review_author, review_reason
FROM {{ ref('stg_rvp_judgments') }}
