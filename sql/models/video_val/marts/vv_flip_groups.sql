-- Per item: the flips of vv_flips counted per comparison and per video (group_by 'video') or per
-- category (group_by 'category'), with each group's share of the comparison's flips, so "12 of
-- the 15 gains are one video" reads as one row: gained = 12, comparison_gained = 15.
WITH grouped AS (
    SELECT policy, run_id, step, base_run_id, base_step, comparison, 'video' AS group_by,
           video AS group_value, count(*) FILTER (WHERE delta > 0) AS gained,
           count(*) FILTER (WHERE delta < 0) AS lost, sum(delta) AS net
    FROM {{ ref('vv_flips') }} GROUP BY ALL
    UNION ALL
    SELECT policy, run_id, step, base_run_id, base_step, comparison, 'category',
           coalesce(category, '(none)'), count(*) FILTER (WHERE delta > 0),
           count(*) FILTER (WHERE delta < 0), sum(delta)
    FROM {{ ref('vv_flips') }} GROUP BY ALL
)
SELECT *,
       CAST(sum(gained) OVER comparison AS BIGINT) AS comparison_gained,
       CAST(sum(lost) OVER comparison AS BIGINT) AS comparison_lost
FROM grouped
WINDOW comparison AS (PARTITION BY policy, run_id, step, base_run_id, base_step, comparison,
                      group_by)
