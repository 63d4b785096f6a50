-- How far two judge runs over the same evaluations agree, per profile and score (pi, vr, vq,
-- final_score), for every ordered pair of judge runs: over the evaluations (system, case) both
-- scored, the Pearson correlation and the mean absolute difference of the scores; over the
-- systems both ranked, Kendall's tau-b between their leaderboards (the systems' mean scores in
-- rvp_leaderboard, modalities together).
WITH scores AS (
    UNPIVOT (SELECT profile, judge_run_id, system, case_id, pi, vr, vq, final_score
             FROM {{ ref('rvp_candidate_scores') }})
    ON pi, vr, vq, final_score INTO NAME metric VALUE score
),
runs AS (SELECT DISTINCT profile, judge_run_id FROM scores),
run_pairs AS (
    SELECT a.profile, a.judge_run_id, b.judge_run_id AS base_judge_run_id
    FROM runs AS a JOIN runs AS b ON b.profile = a.profile AND b.judge_run_id <> a.judge_run_id
),
evaluations AS (
    SELECT p.profile, p.judge_run_id, p.base_judge_run_id, a.metric,
           -- one pair or a side without variance: no correlation (corr gives NaN)
           count(*) AS n_common,
           {{ finite_or_null('corr(a.score, b.score ORDER BY a.score, b.score)') }}
               AS correlation,
           avg(abs(a.score - b.score) ORDER BY abs(a.score - b.score))
               AS mean_abs_diff
    FROM run_pairs AS p
    JOIN scores AS a ON a.profile = p.profile AND a.judge_run_id = p.judge_run_id
    JOIN scores AS b ON b.profile = p.profile AND b.judge_run_id = p.base_judge_run_id
                    AND b.system = a.system AND b.case_id = a.case_id AND b.metric = a.metric
    GROUP BY ALL
),
boards AS (
    UNPIVOT (SELECT profile, judge_run_id, system, pi, vr, vq, final_score
             FROM {{ ref('rvp_leaderboard') }})
    ON pi, vr, vq, final_score INTO NAME metric VALUE score
),
ranked AS (
    -- both runs' means of every system the two runs both score
    SELECT p.profile, p.judge_run_id, p.base_judge_run_id, a.metric, a.system,
           a.score AS x, b.score AS y
    FROM run_pairs AS p
    JOIN boards AS a ON a.profile = p.profile AND a.judge_run_id = p.judge_run_id
    JOIN boards AS b ON b.profile = p.profile AND b.judge_run_id = p.base_judge_run_id
                    AND b.system = a.system AND b.metric = a.metric
),
tau AS (
    -- tau-b = sum sign(dx) sign(dy) / sqrt(sum sign(dx)^2 * sum sign(dy)^2) over system pairs
    SELECT i.profile, i.judge_run_id, i.base_judge_run_id, i.metric,
           sum(sign(i.x - j.x) * sign(i.y - j.y))
             / sqrt(sum(abs(sign(i.x - j.x))) * sum(abs(sign(i.y - j.y)))) AS kendall_tau
    FROM ranked AS i
    JOIN ranked AS j ON j.profile = i.profile AND j.judge_run_id = i.judge_run_id
                    AND j.base_judge_run_id = i.base_judge_run_id AND j.metric = i.metric
                    AND j.system > i.system
    GROUP BY ALL
),
systems AS (
    SELECT profile, judge_run_id, base_judge_run_id, metric, count(*) AS n_systems
    FROM ranked GROUP BY ALL
)
SELECT e.profile, e.judge_run_id, e.base_judge_run_id, e.metric, e.n_common, e.correlation,
       e.mean_abs_diff, coalesce(s.n_systems, 0) AS n_systems,
       {{ finite_or_null('t.kendall_tau') }} AS kendall_tau  -- all ties on a side: 0/0
FROM evaluations AS e
LEFT JOIN systems AS s USING (profile, judge_run_id, base_judge_run_id, metric)
LEFT JOIN tau AS t USING (profile, judge_run_id, base_judge_run_id, metric)
ORDER BY e.profile, e.judge_run_id, e.base_judge_run_id, e.metric
