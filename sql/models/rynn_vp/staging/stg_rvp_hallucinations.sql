-- Staging: the rvp_hallucinations table as written by its asset, each with `is_final` of its
-- judgment.
SELECT h.system, h.case_id, h.evaluation_id, h.judge_run_id, h.attempt, j.is_final AS is_final,
       h.* EXCLUDE (system, case_id, evaluation_id, judge_run_id, attempt)
FROM {{ source('rynn_vp_raw', 'rvp_hallucinations') }} AS h
JOIN {{ ref('stg_rvp_judgments') }} AS j
  ON j.system = h.system AND j.case_id = h.case_id AND j.judge_run_id = h.judge_run_id
 AND j.attempt = h.attempt
