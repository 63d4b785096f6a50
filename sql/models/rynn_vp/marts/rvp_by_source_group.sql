-- Leaderboard per source group (source identifiers, not participant counts; denominators
-- shown), with error bars as in rvp_leaderboard.
WITH means AS (
    SELECT profile, judge_run_id, system, modality, source_group,
           count(final_score) AS n_scored, count(*) AS n_cases,
           avg(pi) AS pi, avg(vr) AS vr, avg(vq) AS vq,
           avg(final_score) AS final_score, avg(legacy_final_score) AS legacy_final_score
    FROM {{ ref('rvp_candidate_scores') }}
    GROUP BY profile, judge_run_id, system, modality, source_group
),
errors AS (
    SELECT * FROM {{ clustered_stats(ref('rvp_candidate_scores'), ['profile', 'judge_run_id', 'system', 'modality', 'source_group'], 'case_id',
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
JOIN errors AS e USING (profile, judge_run_id, system, modality, source_group)
ORDER BY m.profile, m.judge_run_id, m.system, m.modality, m.source_group
