-- The val leaderboard: every checkpoint of every run over all rows (`data_source = 'all'`,
-- the micro-average) under each scoring policy, with its 95 % interval, and its run's best
-- checkpoint marked (ties: the earliest step) with the paired test against the runner-up.
-- What `benchlake demo` prints and the results browser's index lists; the per-source rows
-- stay in vv_scores.
SELECT s.policy, p.is_default, s.run_id, s.step, s.n_rows, s.n_responded, s.accuracy,
       s.accuracy_se, s.accuracy_ci_low, s.accuracy_ci_high, s.format_rate, s.composite,
       s.composite_se, s.composite_ci_low, s.composite_ci_high, s.se_method,
       coalesce(b.best_step = s.step, false) AS is_best,
       CASE WHEN b.best_step = s.step THEN b.next_step END AS next_step,
       CASE WHEN b.best_step = s.step THEN b.best_vs_next_p END AS best_vs_next_p,
       CASE WHEN b.best_step = s.step
            THEN 'best' || coalesce(' (vs step ' || b.next_step || ': p = '
                                    || round(b.best_vs_next_p, 3) || ')', '')
            ELSE '' END AS best
FROM {{ ref('vv_scores') }} AS s
JOIN {{ ref('vv_scoring_policies') }} AS p USING (policy)
LEFT JOIN {{ ref('vv_best_checkpoints') }} AS b USING (policy, run_id)
WHERE s.data_source = 'all'
