-- Leaderboard per source group (source identifiers, not participant counts; denominators shown).
SELECT profile, judge_run_id, system, modality, source_group,
       count(final_score) AS n_scored, count(*) AS n_cases,
       avg(pi) AS pi, avg(vr) AS vr, avg(vq) AS vq,
       avg(final_score) AS final_score, avg(legacy_final_score) AS legacy_final_score
FROM {{ ref('rvp_candidate_scores') }}
GROUP BY profile, judge_run_id, system, modality, source_group
ORDER BY profile, judge_run_id, system, modality, source_group
