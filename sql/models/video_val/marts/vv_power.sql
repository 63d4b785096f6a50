-- How large a difference each paired comparison of vv_run_pairs could detect: per scoring
-- policy, pair and data_source, mde_80, the smallest accuracy difference a paired test at
-- alpha = 0.05 (two-sided) detects with 80 % power over these n_common questions, from the
-- variance the pair shows: (z(0.975) + z(0.8)) x diff_se = 2.80 x diff_se (macros/statistics.sql
-- mde). diff_se is vv_run_pairs' standard error, clustered by video; mde_80_iid is the same from
-- the plain standard deviation of the per-question differences, diff_sd / sqrt(n_common), as
-- if the questions were independent (what lmms-eval 0.7.3's power_analysis reports as
-- min_detectable_effect). design_effect = (diff_se / (diff_sd / sqrt(n)))^2 says how much the
-- questions sharing a video inflate the variance. An observed |accuracy_diff| below mde_80 is
-- one such a campaign would often miss: read it as "not measurable here", not as "no effect".
-- vv_power_plan turns the same figures into questions needed for chosen differences.
SELECT policy, run_id, step, base_run_id, base_step, data_source, n_common, n_videos,
       accuracy_diff, diff_se, diff_sd,
       {{ finite_or_null('(diff_se * diff_se) * n_common / (diff_sd * diff_sd)') }}
           AS design_effect,
       {{ mde('diff_se') }} AS mde_80,
       {{ mde('diff_sd / sqrt(n_common)') }} AS mde_80_iid
FROM {{ ref('int_vv_pair_comparisons') }}
ORDER BY policy, run_id, step, base_run_id, base_step, data_source
