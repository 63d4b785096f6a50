-- The leaderboard under two profiles side by side, per judge run and modality: mean final score
-- and rank under each, and how far each system moved (n_scored is the same under both).
SELECT b.profile AS base_profile, a.profile, a.judge_run_id, a.modality, a.system,
       a.n_scored, a.n_cases, b.final_score AS base_final_score, a.final_score,
       a.final_score - b.final_score AS delta_final_score,
       b.rank_in_modality AS base_rank, a.rank_in_modality AS rank,
       b.rank_in_modality - a.rank_in_modality AS rank_gain
FROM {{ ref('rvp_leaderboard') }} AS a
JOIN {{ ref('rvp_leaderboard') }} AS b
  ON b.judge_run_id = a.judge_run_id AND b.system = a.system AND b.modality = a.modality
 AND b.profile <> a.profile
ORDER BY base_profile, a.profile, a.judge_run_id, a.modality, a.rank_in_modality
