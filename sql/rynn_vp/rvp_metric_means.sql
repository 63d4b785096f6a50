-- Mean of every metric (diagnostics included) over the final accepted judgments, per judge run,
-- system and modality, with the number of judgments carrying it.
SELECT judge_run_id, system, modality, metric, count(*) AS n_scored, avg(score) AS mean,
       min(score) AS min, max(score) AS max
FROM int_rvp_metric_scores
GROUP BY ALL
ORDER BY judge_run_id, system, modality, metric
