-- What moves between two reporting profiles, per judge run, system and case (pick a pair with
-- WHERE profile = '...' AND base_profile = '...'): both final scores and the change. Rescoring
-- under another profile re-weights the same judgments; nothing is re-evaluated.
SELECT b.profile AS base_profile, a.profile, a.judge_run_id, a.system, a.case_id, a.modality,
       b.final_score AS base_final_score, a.final_score,
       a.final_score - b.final_score AS delta_final_score,
       b.pi AS base_pi, a.pi, a.pi - b.pi AS delta_pi
FROM {{ ref('rvp_candidate_scores') }} AS a
JOIN {{ ref('rvp_candidate_scores') }} AS b
  ON b.judge_run_id = a.judge_run_id AND b.system = a.system AND b.case_id = a.case_id
 AND b.profile <> a.profile
WHERE a.status = 'scored'
ORDER BY base_profile, a.profile, a.judge_run_id, abs(a.final_score - b.final_score) DESC,
         a.system, a.case_id
