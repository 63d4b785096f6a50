-- Power of each paired comparison of vv_run_pairs: mde_80, the smallest accuracy difference the
-- comparison detects with 80 % power in a two-sided test at alpha = 0.05, from its observed
-- standard error (diff_se: the paired differences' SE, clustered by video):
-- mde_80 = (z(0.975) + z(0.80)) * diff_se, z the standard normal quantiles 1.959964 and
-- 0.841621 (the large-sample form lmms-eval's power analysis uses). For planning, the SE shrinks
-- as 1 / sqrt(questions): questions_for_1pt and questions_for_2pt are how many common questions
-- (at the same variance per question) would detect a 1- or 2-point accuracy difference
-- (0.01, 0.02). NULL where the SE is (one common question) or 0 (no difference anywhere).
SELECT policy, run_id, step, base_run_id, base_step, data_source, n_common, accuracy_diff,
       diff_se, (1.959964 + 0.841621) * diff_se AS mde_80,
       CASE WHEN diff_se > 0 THEN CAST(ceil(n_common * power((1.959964 + 0.841621) * diff_se
                                                             / 0.01, 2)) AS BIGINT) END
           AS questions_for_1pt,
       CASE WHEN diff_se > 0 THEN CAST(ceil(n_common * power((1.959964 + 0.841621) * diff_se
                                                             / 0.02, 2)) AS BIGINT) END
           AS questions_for_2pt
FROM {{ ref('vv_run_pairs') }}
