-- The six logical stages per evaluation and judge run (gt_compilation, observer, vr_vq_judge,
-- hallucination_auditor, pi_judge, critic) with their attempts (retry, repair, manager review);
-- gt_compilation is `cached` when a current compilation came from an earlier judge run.
SELECT system, case_id, evaluation_id, judge_run_id, stage_no, stage, attempt, attempt_kind,
       status
FROM {{ ref('stg_rvp_stages') }}
ORDER BY system, case_id, judge_run_id, stage_no, attempt
