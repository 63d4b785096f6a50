-- Leaderboard per scene label (means over scored cases of that scene; denominators shown).
SELECT profile, judge_run_id, system, modality, scene,
       count(final_score) AS n_scored, count(*) AS n_cases,
       avg(pi) AS pi, avg(vr) AS vr, avg(vq) AS vq,
       avg(final_score) AS final_score, avg(legacy_final_score) AS legacy_final_score
FROM {{ ref('rvp_candidate_scores') }}
GROUP BY profile, judge_run_id, system, modality, scene
ORDER BY profile, judge_run_id, system, modality, scene
