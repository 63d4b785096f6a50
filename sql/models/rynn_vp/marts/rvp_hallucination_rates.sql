-- Share of scored evaluations with at least one confirmed (localized) hallucination in the final
-- judgment, and hallucinations per scored evaluation, per judge run, system and modality.
WITH finals AS (
    SELECT judge_run_id, system, input_modality AS modality, n_hallucinations
    FROM {{ ref('stg_rvp_judgments') }} WHERE is_final
)
SELECT judge_run_id, system, modality, count(*) AS n_scored,
       count(*) FILTER (WHERE n_hallucinations > 0) AS n_with_hallucination,
       count(*) FILTER (WHERE n_hallucinations > 0) / count(*) AS hallucination_rate,
       sum(n_hallucinations) AS hallucinations, sum(n_hallucinations) / count(*) AS per_evaluation
FROM finals
GROUP BY ALL
ORDER BY judge_run_id, system, modality
