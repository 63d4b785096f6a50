-- Every system against every other system of the same modality, per profile and judge run, over
-- the cases both have a final score for. final_score_diff is the mean of the per-case differences
-- (system - base_system); its SE is the clustered SE over cases (one evaluation per case: the
-- paired t test's s/sqrt(n)), the interval mean -/+ t(0.975, n_common - 1) SE clipped to
-- [-100, 100], p_value the two-sided paired t test.
-- bootstrap_p: a paired bootstrap test of no difference: B resamples of the cases (var
-- bootstrap_draws, 2,000) with the per-case differences centred on 0,
-- p = (1 + #{|resampled mean| >= |observed mean|}) / (B + 1); NULL for a single common case (every
-- resample is that case: no test), as p_value then has no degree of freedom.
-- The resamples come from a fixed integer hash (macros/statistics.sql), so the view returns the
-- same p on every run and machine; a pair and its mirror get the same p.
WITH scored AS (
    SELECT profile, judge_run_id, modality, system, case_id, final_score
    FROM {{ ref('rvp_candidate_scores') }}
    WHERE final_score IS NOT NULL
),
common AS MATERIALIZED (
    SELECT a.profile, a.judge_run_id, a.modality, a.system, b.system AS base_system, a.case_id,
           a.final_score - b.final_score AS diff
    FROM scored AS a
    JOIN scored AS b ON b.profile = a.profile AND b.judge_run_id = a.judge_run_id
                    AND b.modality = a.modality AND b.case_id = a.case_id
                    AND b.system <> a.system
),
errors AS (
    SELECT * FROM {{ clustered_stats('common',
                                     ['profile', 'judge_run_id', 'modality', 'system',
                                      'base_system'], 'case_id', ['diff']) }}
),
means AS (
    SELECT profile, judge_run_id, modality, system, base_system, count(*) AS n_common,
           avg(diff ORDER BY diff) AS final_score_diff, list(diff ORDER BY case_id) AS diffs
    FROM common GROUP BY ALL
),
boot AS (
    -- computed once per unordered pair (system < base_system), mirrored below
    SELECT profile, judge_run_id, modality, system, base_system,
           (1 + count(*) FILTER (WHERE abs(list_avg(list_transform(
                {{ bootstrap_indices('r.draw', 'n_common', var('bootstrap_seed')) }},
                lambda i: diffs[i])) - final_score_diff) >= abs(final_score_diff)))
           / ({{ var('bootstrap_draws') }} + 1) AS bootstrap_p
    FROM means CROSS JOIN range({{ var('bootstrap_draws') }}) AS r(draw)
    WHERE system < base_system AND n_common >= 2
    GROUP BY ALL
),
tested AS (
    SELECT m.*, e.diff_se, e.diff_clusters - 1 AS diff_df,
           CASE WHEN e.diff_se = 0 THEN
                    CASE WHEN m.final_score_diff = 0 THEN 0.0
                         ELSE sign(m.final_score_diff) * 'inf'::DOUBLE END
                ELSE m.final_score_diff / e.diff_se END AS diff_t
    FROM means AS m
    JOIN errors AS e USING (profile, judge_run_id, modality, system, base_system)
)
SELECT t.profile, t.judge_run_id, t.modality, t.system, t.base_system, t.n_common,
       t.final_score_diff, t.diff_se,
       {{ interval('diff', 't.final_score_diff', 't.diff_se', 't.diff_df', -100, 100) }},
       {{ t_two_sided_p('t.diff_t', 't.diff_df') }} AS p_value,
       b.bootstrap_p
FROM tested AS t
LEFT JOIN boot AS b
       ON b.profile = t.profile AND b.judge_run_id = t.judge_run_id AND b.modality = t.modality
      AND b.system = least(t.system, t.base_system)
      AND b.base_system = greatest(t.system, t.base_system)
ORDER BY t.profile, t.judge_run_id, t.modality, t.system, t.base_system
