-- Where two judge runs disagree enough for a person to look: every evaluation both runs judged
-- whose final judge records differ, in at least one metric, by more than that metric's
-- threshold (seed rvp_review_thresholds), with the two records side by side, one row per
-- compared metric. A judge's final record is its highest attempt that is not a manager review:
-- the review settles the disagreement, it is not one side of it. `reviewed` says whether a
-- manager review of the evaluation exists in either run, and by whom and why (the latest).
WITH judge_finals AS (
    SELECT * FROM {{ ref('stg_rvp_judgments') }}
    WHERE attempt_kind IS DISTINCT FROM 'manager_review'
    QUALIFY attempt = max(attempt) OVER (PARTITION BY system, case_id, judge_run_id)
),
scores AS (
    -- one row per (record, metric it carries): a metric one side lacks is not compared
    UNPIVOT (SELECT evaluation_id, system, case_id, judge_run_id, attempt, source_file,
                    {{ rvp_metric_columns() }} FROM judge_finals)
    ON {{ rvp_metric_columns() }} INTO NAME metric_column VALUE score
),
compared AS (
    SELECT a.evaluation_id, a.system, a.case_id, a.judge_run_id,
           b.judge_run_id AS base_judge_run_id, m.metric, a.score, b.score AS base_score,
           abs(a.score - b.score) AS abs_diff, t.max_abs_diff,
           abs(a.score - b.score) > t.max_abs_diff AS over_threshold,
           a.attempt, b.attempt AS base_attempt, a.source_file, b.source_file AS base_source_file
    FROM scores AS a
    -- each pair of runs once: the run whose id sorts first is `judge_run_id`
    JOIN scores AS b ON b.system = a.system AND b.case_id = a.case_id
                    AND b.metric_column = a.metric_column AND b.judge_run_id > a.judge_run_id
    JOIN {{ ref('rvp_metrics') }} AS m ON m."column" = a.metric_column
    JOIN {{ ref('rvp_review_thresholds') }} AS t ON t.metric = m.metric
),
flagged AS (
    SELECT evaluation_id, judge_run_id, base_judge_run_id,
           count(*) FILTER (WHERE over_threshold) AS n_over_threshold
    FROM compared
    GROUP BY ALL
    HAVING count(*) FILTER (WHERE over_threshold) > 0
),
reviews AS (
    SELECT f.evaluation_id, f.judge_run_id, f.base_judge_run_id,
           count(r.attempt) > 0 AS reviewed,
           arg_max(r.review_author, r.attempt) AS review_author,
           arg_max(r.review_reason, r.attempt) AS review_reason
    FROM flagged AS f
    LEFT JOIN {{ ref('stg_rvp_judgments') }} AS r
      ON r.evaluation_id = f.evaluation_id AND r.attempt_kind = 'manager_review'
     AND r.judge_run_id IN (f.judge_run_id, f.base_judge_run_id)
    GROUP BY ALL
)
SELECT c.evaluation_id, c.system, c.case_id, c.judge_run_id, c.base_judge_run_id, c.metric,
       c.score, c.base_score, c.abs_diff, c.max_abs_diff, c.over_threshold,
       f.n_over_threshold, c.attempt, c.base_attempt, c.source_file, c.base_source_file,
       r.reviewed, r.review_author, r.review_reason
FROM compared AS c
JOIN flagged AS f USING (evaluation_id, judge_run_id, base_judge_run_id)
JOIN reviews AS r USING (evaluation_id, judge_run_id, base_judge_run_id)
ORDER BY c.evaluation_id, c.judge_run_id, c.base_judge_run_id, c.metric
