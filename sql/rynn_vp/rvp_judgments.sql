-- Accepted judgment records, one row per attempt. `is_final` marks the attempt that counts per
-- (system, case, judge run): a manager review wins, else the highest attempt; the others stay
-- for audit. Metric columns are null when the record does not carry that metric.
SELECT system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind, is_final,
       source_file, file_version, line,
       pi_1, pi_2, pi_3, pi_4, pi_5, pi_6, vr_1, vr_2, vr_3, vr_4, vr_5, vr_6, vr_7, vr_8, vq,
       vq_d1, vq_d2, vq_d3, vq_d4, vq_d5, vq_d6, vq_d7,
       n_hallucinations, evidence, has_explicit_plan, input_modality, judge_model,
       judge_reasoning, prompt_version, candidate_scope, context_sharing, record_sha256
FROM stg_rvp_judgments
