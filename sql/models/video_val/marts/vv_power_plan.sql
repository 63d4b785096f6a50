-- Planning from vv_power: for each paired comparison and each difference of vv_power_targets,
-- the questions a campaign would need to detect it at 80 % power, alpha = 0.05 two-sided, if its
-- questions vary as this pair's do: questions_needed from the clustered variance
-- (diff_se^2 x n_common per question, so videos shared as here), questions_needed_iid from the
-- per-question standard deviation diff_sd (lmms-eval 0.7.3's power_analysis min_n for
-- std_diff = diff_sd). For any other difference d: n_common x (mde_80 / d)^2.
SELECT p.policy, p.run_id, p.step, p.base_run_id, p.base_step, p.data_source, t.target_diff,
       p.n_common, p.mde_80,
       {{ questions_needed('t.target_diff', 'p.diff_se * sqrt(p.n_common)') }} AS questions_needed,
       {{ questions_needed('t.target_diff', 'p.diff_sd') }} AS questions_needed_iid
FROM {{ ref('vv_power') }} AS p
CROSS JOIN {{ ref('vv_power_targets') }} AS t
ORDER BY p.policy, p.run_id, p.step, p.base_run_id, p.base_step, p.data_source, t.target_diff
