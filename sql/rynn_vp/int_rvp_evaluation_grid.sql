-- Intermediate: every (judge run, system, case) a report must account for: each judge run seen
-- × each system with candidates × each accepted case, with the candidate's status and modality.
-- A row without a final accepted judgment gets no score (never 0) but still counts in n_cases.
WITH runs AS (SELECT DISTINCT judge_run_id FROM stg_rvp_judgments),
systems AS (
    SELECT system, string_agg(DISTINCT modality, '+' ORDER BY modality) AS system_modality
    FROM stg_rvp_candidates GROUP BY system
)
SELECT r.judge_run_id, s.system, c.case_id, c.scene, c.source_group, c.has_explicit_plan,
       coalesce(k.modality, s.system_modality) AS modality,
       CASE WHEN k.case_id IS NULL THEN 'missing_candidate'
            WHEN NOT k.ok THEN 'unusable_candidate'
            WHEN j.case_id IS NULL THEN 'no_final_judgment'
            ELSE 'scored' END AS status
FROM runs AS r
CROSS JOIN systems AS s
CROSS JOIN stg_rvp_cases AS c
LEFT JOIN stg_rvp_candidates AS k ON k.system = s.system AND k.case_id = c.case_id
LEFT JOIN stg_rvp_judgments AS j
       ON j.is_final AND j.judge_run_id = r.judge_run_id AND j.system = s.system
      AND j.case_id = c.case_id
