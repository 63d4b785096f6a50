-- Two systems side by side, case by case: for every pair of systems of one modality, profile and
-- judge run (as rvp_system_pairs), each case both have a final score for, with both systems'
-- PI, VR, VQ and final scores and their differences (system - base_system). A case missing on
-- either side is no diff (rvp_system_pairs' n_common counts the cases here). order_flips: the
-- case's final-score difference has the opposite sign of the systems' mean difference
-- (rvp_system_pairs.final_score_diff): the cases where the ranking turns around.
WITH scored AS (
    SELECT profile, judge_run_id, modality, system, case_id, scene, source_group, pi, vr, vq,
           final_score
    FROM {{ ref('rvp_candidate_scores') }}
    WHERE final_score IS NOT NULL
)
SELECT a.profile, a.judge_run_id, a.modality, a.system, b.system AS base_system, a.case_id,
       a.scene, a.source_group,
       a.final_score, b.final_score AS base_final_score,
       a.final_score - b.final_score AS final_score_diff,
       a.pi, b.pi AS base_pi, a.pi - b.pi AS pi_diff,
       a.vr, b.vr AS base_vr, a.vr - b.vr AS vr_diff,
       a.vq, b.vq AS base_vq, a.vq - b.vq AS vq_diff,
       sign(a.final_score - b.final_score) * sign(p.final_score_diff) < 0 AS order_flips
FROM scored AS a
JOIN scored AS b ON b.profile = a.profile AND b.judge_run_id = a.judge_run_id
                AND b.modality = a.modality AND b.case_id = a.case_id AND b.system <> a.system
JOIN {{ ref('rvp_system_pairs') }} AS p
     ON p.profile = a.profile AND p.judge_run_id = a.judge_run_id AND p.modality = a.modality
    AND p.system = a.system AND p.base_system = b.system
