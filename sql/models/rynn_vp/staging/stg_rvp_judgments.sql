-- Staging: the rvp_judgments table as written by its asset (a part per segment of files), and
-- which attempt of each (system, case, judge run) is final: the highest manager review, else
-- the highest attempt (accepted attempts of a judge run have distinct numbers).
SELECT system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind,
       row_number() OVER (
           PARTITION BY system, case_id, judge_run_id
           ORDER BY coalesce(attempt_kind = 'manager_review', false) DESC, attempt DESC) = 1
           AS is_final,
       * EXCLUDE (system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind)
FROM {{ source('rynn_vp_raw', 'rvp_judgments') }}
