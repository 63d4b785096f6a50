-- vv_flips counted per pair of checkpoints and group of questions, so a gain that is a handful
-- of flips on one video shows: per scoring policy, pair (run_id, step against base_run_id,
-- base_step) and dimension (`data_source`, `task`, `category`, `video`) value, the gains
-- (delta > 0), the losses (delta < 0), their sum of deltas, and the pair's totals beside them:
-- "12 of the 15 gains are one video" is the row with n_gains = 12, pair_gains = 15.
-- The gains and losses are vv_run_pairs' n_only_run and n_only_base for the pairs both have.
-- Questions without the attribute (task and category are Video-MME's) form the NULL value.
WITH flips AS (SELECT * FROM {{ ref('vv_flips') }}),
grouped AS (
    {%- for dimension in ['data_source', 'task', 'category', 'video'] %}
    SELECT policy, run_id, step, base_run_id, base_step, '{{ dimension }}' AS dimension,
           {{ dimension }} AS value, count(*) FILTER (WHERE delta > 0) AS n_gains,
           count(*) FILTER (WHERE delta < 0) AS n_losses, sum(delta) AS net_delta
    FROM flips GROUP BY ALL
    {{ 'UNION ALL' if not loop.last }}
    {%- endfor %}
)
SELECT *, CAST(sum(n_gains) OVER pair AS BIGINT) AS pair_gains,
       CAST(sum(n_losses) OVER pair AS BIGINT) AS pair_losses
FROM grouped
WINDOW pair AS (PARTITION BY policy, run_id, step, base_run_id, base_step, dimension)
