-- Means over scored cases only; n_scored (cases with a final accepted judgment) and n_cases
-- (accepted cases) are always shown. One row per profile, judge run, system and modality: video
-- and ordered-image protocols are ranked separately, never mixed silently.
-- Error bars: the clustered standard error over cases (macros/statistics.sql; one evaluation
-- per case, so it is the CLT form s/sqrt(n)) and mean -/+ t(0.975, n_scored - 1) SE, clipped to
-- 0-100.
WITH means AS (
    SELECT profile, judge_run_id, system, modality,
           count(final_score) AS n_scored, count(*) AS n_cases,
           avg(pi) AS pi, avg(vr) AS vr, avg(vq) AS vq,
           avg(final_score) AS final_score, avg(legacy_final_score) AS legacy_final_score,
       CASE WHEN count(final_score) > 0 THEN
           rank() OVER (PARTITION BY profile, judge_run_id, modality, count(final_score) > 0
                        ORDER BY avg(final_score) DESC) END AS rank_in_modality
    FROM {{ ref('rvp_candidate_scores') }}
    GROUP BY profile, judge_run_id, system, modality
),
errors AS (
    SELECT * FROM {{ clustered_stats(ref('rvp_candidate_scores'), ['profile', 'judge_run_id', 'system', 'modality'], 'case_id',
                                     ['pi', 'vr', 'vq', 'final_score']) }}
)
SELECT m.*,
       e.pi_se,
       {{ interval('pi', 'm.pi', 'e.pi_se', 'e.pi_clusters - 1', 0, 100) }},
       e.vr_se,
       {{ interval('vr', 'm.vr', 'e.vr_se', 'e.vr_clusters - 1', 0, 100) }},
       e.vq_se,
       {{ interval('vq', 'm.vq', 'e.vq_se', 'e.vq_clusters - 1', 0, 100) }},
       e.final_score_se,
       {{ interval('final_score', 'm.final_score', 'e.final_score_se', 'e.final_score_clusters - 1', 0, 100) }},
       'clustered:case' AS se_method
FROM means AS m
JOIN errors AS e USING (profile, judge_run_id, system, modality)
ORDER BY m.profile, m.judge_run_id, m.modality, m.rank_in_modality NULLS LAST, m.system
