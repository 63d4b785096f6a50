-- Means over scored cases only; n_scored (cases with a final accepted judgment) and n_cases
-- (accepted cases) are always shown. One row per profile, judge run, system and modality: video
-- and ordered-image protocols are ranked separately, never mixed silently.
SELECT profile, judge_run_id, system, modality,
       count(final_score) AS n_scored, count(*) AS n_cases,
       avg(pi) AS pi, avg(vr) AS vr, avg(vq) AS vq,
       avg(final_score) AS final_score, avg(legacy_final_score) AS legacy_final_score,
       CASE WHEN count(final_score) > 0 THEN
           rank() OVER (PARTITION BY profile, judge_run_id, modality, count(final_score) > 0
                        ORDER BY avg(final_score) DESC) END AS rank_in_modality
FROM {{ ref('rvp_candidate_scores') }}
GROUP BY profile, judge_run_id, system, modality
ORDER BY profile, judge_run_id, modality, rank_in_modality NULLS LAST, system
