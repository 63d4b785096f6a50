-- Intermediate: the final accepted judgment of each (system, case, judge run), one row per
-- metric it carries (long format), so weights can be joined as data.
SELECT system, case_id, evaluation_id, judge_run_id, input_modality AS modality,
       has_explicit_plan, upper(replace(metric_column, '_', '-')) AS metric, score
FROM (
    UNPIVOT (SELECT * FROM stg_rvp_judgments WHERE is_final)
    ON pi_1, pi_2, pi_3, pi_4, pi_5, pi_6, vr_1, vr_2, vr_3, vr_4, vr_5, vr_6, vr_7, vr_8, vq,
       vq_d1, vq_d2, vq_d3, vq_d4, vq_d5, vq_d6, vq_d7
    INTO NAME metric_column VALUE score
)
WHERE score IS NOT NULL
