-- Mean of every metric (diagnostics included) over the final accepted judgments, per judge run,
-- system and modality, with the number of judgments carrying it. Aggregated first, then turned
-- into one row per metric.
WITH agg AS (
    SELECT judge_run_id, system, input_modality AS modality,
           {'n': count(pi_1), 'mean': avg(pi_1), 'min': min(pi_1), 'max': max(pi_1)} AS pi_1,
           {'n': count(pi_2), 'mean': avg(pi_2), 'min': min(pi_2), 'max': max(pi_2)} AS pi_2,
           {'n': count(pi_3), 'mean': avg(pi_3), 'min': min(pi_3), 'max': max(pi_3)} AS pi_3,
           {'n': count(pi_4), 'mean': avg(pi_4), 'min': min(pi_4), 'max': max(pi_4)} AS pi_4,
           {'n': count(pi_5), 'mean': avg(pi_5), 'min': min(pi_5), 'max': max(pi_5)} AS pi_5,
           {'n': count(pi_6), 'mean': avg(pi_6), 'min': min(pi_6), 'max': max(pi_6)} AS pi_6,
           {'n': count(vr_1), 'mean': avg(vr_1), 'min': min(vr_1), 'max': max(vr_1)} AS vr_1,
           {'n': count(vr_2), 'mean': avg(vr_2), 'min': min(vr_2), 'max': max(vr_2)} AS vr_2,
           {'n': count(vr_3), 'mean': avg(vr_3), 'min': min(vr_3), 'max': max(vr_3)} AS vr_3,
           {'n': count(vr_4), 'mean': avg(vr_4), 'min': min(vr_4), 'max': max(vr_4)} AS vr_4,
           {'n': count(vr_5), 'mean': avg(vr_5), 'min': min(vr_5), 'max': max(vr_5)} AS vr_5,
           {'n': count(vr_6), 'mean': avg(vr_6), 'min': min(vr_6), 'max': max(vr_6)} AS vr_6,
           {'n': count(vr_7), 'mean': avg(vr_7), 'min': min(vr_7), 'max': max(vr_7)} AS vr_7,
           {'n': count(vr_8), 'mean': avg(vr_8), 'min': min(vr_8), 'max': max(vr_8)} AS vr_8,
           {'n': count(vq), 'mean': avg(vq), 'min': min(vq), 'max': max(vq)} AS vq,
           {'n': count(vq_d1), 'mean': avg(vq_d1), 'min': min(vq_d1), 'max': max(vq_d1)} AS vq_d1,
           {'n': count(vq_d2), 'mean': avg(vq_d2), 'min': min(vq_d2), 'max': max(vq_d2)} AS vq_d2,
           {'n': count(vq_d3), 'mean': avg(vq_d3), 'min': min(vq_d3), 'max': max(vq_d3)} AS vq_d3,
           {'n': count(vq_d4), 'mean': avg(vq_d4), 'min': min(vq_d4), 'max': max(vq_d4)} AS vq_d4,
           {'n': count(vq_d5), 'mean': avg(vq_d5), 'min': min(vq_d5), 'max': max(vq_d5)} AS vq_d5,
           {'n': count(vq_d6), 'mean': avg(vq_d6), 'min': min(vq_d6), 'max': max(vq_d6)} AS vq_d6,
           {'n': count(vq_d7), 'mean': avg(vq_d7), 'min': min(vq_d7), 'max': max(vq_d7)} AS vq_d7
    FROM stg_rvp_judgments
    WHERE is_final
    GROUP BY judge_run_id, system, input_modality
)
SELECT judge_run_id, system, modality, upper(replace(metric_column, '_', '-')) AS metric,
       s.n AS n_scored, s.mean, s.min, s.max
FROM (UNPIVOT agg ON pi_1, pi_2, pi_3, pi_4, pi_5, pi_6, vr_1, vr_2, vr_3, vr_4, vr_5, vr_6, vr_7, vr_8, vq, vq_d1, vq_d2, vq_d3, vq_d4, vq_d5, vq_d6, vq_d7 INTO NAME metric_column VALUE s)
WHERE s.n > 0
ORDER BY judge_run_id, system, modality, metric
