-- Means over scored cases only; n_scored (cases with a final accepted judgment), n_cases
-- (accepted cases) and n_snapshot_cases (every case of the snapshot, refused ones included) are
-- always shown. One row per profile, judge run, system and modality: video and ordered-image
-- protocols are ranked separately, never mixed silently.
-- Error bars: the clustered standard error over cases (macros/statistics.sql; one evaluation
-- per case, so it is the CLT form s/sqrt(n)) and mean -/+ t(0.975, n_scored - 1) SE, clipped to
-- 0-100 (the macro rvp_scores_by, shared with rvp_by_scene and rvp_by_source_group).
SELECT b.*,
       (SELECT count(*) FROM {{ ref('int_rvp_snapshot_cases') }}) AS n_snapshot_cases
FROM (
{{ rvp_scores_by(['profile', 'judge_run_id', 'system', 'modality'],
                 extra="CASE WHEN count(final_score) > 0 THEN
           rank() OVER (PARTITION BY profile, judge_run_id, modality, count(final_score) > 0
                        ORDER BY avg(final_score ORDER BY final_score) DESC) END
           AS rank_in_modality") }}
) AS b
ORDER BY b.profile, b.judge_run_id, b.modality, b.rank_in_modality NULLS LAST, b.system
