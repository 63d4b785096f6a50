-- vv_flips counted per pair of checkpoints and group of questions, so a gain that is a handful
-- of flips on one video shows: per scoring policy, pair (run_id, step against base_run_id,
-- base_step) and dimension (`data_source`, `task`, `category`, `video`) value, the gains
-- (delta > 0), the losses (delta < 0), their sum of deltas, and the pair's totals beside them:
-- "12 of the 15 gains are one video" is the row with n_gains = 12, pair_gains = 15.
-- The gains and losses are vv_run_pairs' n_only_run and n_only_base for the pairs both have.
-- Questions without the attribute (task and category are Video-MME's) form the NULL value.
-- One pass over the flips (int_vv_flips, before the policy: the same under each), the four
-- dimensions as grouping sets over small integer ids of their values (hashing millions of video
-- URIs would cost more than the counting), named after the counting.
{%- set pair = 'run_id, step, base_step' %}
{%- set dimensions = ['data_source', 'task', 'category', 'video'] %}
WITH questions AS MATERIALIZED (
    SELECT uid
           {%- for d in dimensions %}, {{ d }}, dense_rank() OVER (ORDER BY {{ d }}) AS {{ d }}_id
           {%- endfor %}
    FROM (SELECT uid, data_source, task, category, coalesce(video_uri, uid) AS video
          FROM {{ ref('stg_vv_questions') }})
),
grouped AS (
    SELECT {{ pair }},
           CASE {%- for d in dimensions %} WHEN grouping(q.{{ d }}_id) = 0 THEN '{{ d }}'{% endfor %}
           END AS dimension,
           coalesce({% for d in dimensions %}q.{{ d }}_id{{ ', ' if not loop.last }}{% endfor %})
               AS value_id,
           count(*) FILTER (WHERE f.delta > 0) AS n_gains,
           count(*) FILTER (WHERE f.delta < 0) AS n_losses,
           {{ exact_sum('f.delta') }} AS net_delta
    FROM {{ ref('int_vv_flips') }} AS f
    JOIN questions AS q USING (uid)
    GROUP BY GROUPING SETS ({% for d in dimensions %}({{ pair }}, q.{{ d }}_id){{ ', ' if not loop.last }}{% endfor %})
),
names AS (
    {%- for d in dimensions %}
    SELECT DISTINCT '{{ d }}' AS dimension, {{ d }}_id AS value_id, {{ d }} AS value FROM questions
    {{ 'UNION ALL' if not loop.last }}
    {%- endfor %}
)
SELECT pol.policy, g.run_id, g.step, g.run_id AS base_run_id, g.base_step, g.dimension,
       n.value, g.n_gains, g.n_losses, g.net_delta,
       CAST(sum(g.n_gains) OVER pair AS BIGINT) AS pair_gains,
       CAST(sum(g.n_losses) OVER pair AS BIGINT) AS pair_losses
FROM grouped AS g
JOIN names AS n USING (dimension, value_id)
CROSS JOIN (SELECT policy FROM {{ ref('vv_scoring_policies') }}) AS pol
WINDOW pair AS (PARTITION BY pol.policy, g.run_id, g.step, g.base_step, g.dimension)
