{#- The paired comparison of val checkpoints, shared by vv_run_pairs (many pairs) and
    vv_best_checkpoints (the best against the runner-up): `pairs` is a relation of (policy,
    run_id, step, base_run_id, base_step). Over the questions both sides answered, per pair and
    scope (each data_source, and 'all'): n_common, accuracy_diff (mean of per-question accuracy
    differences, each a mean over its samples), its SE clustered by video and 95 % interval,
    p_value (paired t), mcnemar_p (exact, when both sides have one sample per common question)
    and the discordant counts; diff_sd, the plain standard deviation of the per-question
    differences (ddof 1), and n_videos, the clusters, for the power figures (vv_power).
    Built for campaigns of hundreds of checkpoints: a pair and its mirror are computed once (the
    mirror negates the difference, swaps the discordant counts and keeps every p); the joined
    questions carry integer ids only (checkpoint, question, video, source) and stream into sums
    per video, then per pair (macros/statistics.sql), with the 'all' scope as a grouping set.
    `parts`: when given, the names of the parts of stg_vv_question_scores that hold every
    checkpoint compared: only those files are read. -#}
{% macro vv_paired_comparisons(pairs, parts=none) -%}
(WITH wanted AS (
    SELECT DISTINCT policy, least_pair[1] AS a, least_pair[2] AS b FROM (
        SELECT policy, CASE WHEN (run_id, step) <= (base_run_id, base_step)
                            THEN [{'run_id': run_id, 'step': step},
                                  {'run_id': base_run_id, 'step': base_step}]
                            ELSE [{'run_id': base_run_id, 'step': base_step},
                                  {'run_id': run_id, 'step': step}] END AS least_pair
        FROM {{ pairs }}
    )
),
checkpoints AS (
    SELECT policy, c.run_id, c.step, row_number() OVER (ORDER BY policy, c.run_id, c.step) AS ck
    FROM (SELECT policy, a AS c FROM wanted UNION SELECT policy, b FROM wanted)
),
unordered AS (
    SELECT row_number() OVER (ORDER BY x.ck, y.ck) AS pair_id, x.ck AS ck, y.ck AS base_ck
    FROM wanted AS w
    JOIN checkpoints AS x ON x.policy = w.policy AND x.run_id = w.a.run_id AND x.step = w.a.step
    JOIN checkpoints AS y ON y.policy = w.policy AND y.run_id = w.b.run_id AND y.step = w.b.step
),
question_ids AS (
    SELECT uid, data_source, row_number() OVER (ORDER BY uid) AS qid,
           dense_rank() OVER (ORDER BY data_source) AS src
    FROM {{ ref('stg_vv_questions') }}
),
rows AS MATERIALIZED (  -- the per-question view read once, for the checkpoints compared
    SELECT c.ck, q.qid, q.src, hash(s.video) AS vid, s.accuracy, s.k = 1 AS single
    FROM {{ ref('int_vv_row_scores') }} AS s
    JOIN checkpoints AS c ON c.policy = s.policy AND c.run_id = s.run_id AND c.step = s.step
    JOIN question_ids AS q ON q.uid = s.uid
    {%- if parts is not none %}
    WHERE s.part IN ({% for p in parts %}'{{ p | replace("'", "''") }}', {% endfor %}NULL)
    {%- endif %}
),
sides AS MATERIALIZED (  -- each pair's own side first, so the join order is fixed: planned
    -- freely, DuckDB may join the question rows with themselves on the question alone (hundreds
    -- of checkpoints each) before the pairs, out of memory at 250 checkpoints
    SELECT p.pair_id, p.base_ck, r.qid, r.src, r.vid, r.accuracy, r.single
    FROM unordered AS p JOIN rows AS r ON r.ck = p.ck
),
per_video AS (
    SELECT r.pair_id, r.src, r.vid, {{ cluster_sums('r.accuracy - b.accuracy', 'diff') }},
           count(*) FILTER (WHERE r.accuracy > b.accuracy) AS n_only_run,
           count(*) FILTER (WHERE r.accuracy < b.accuracy) AS n_only_base,
           bool_and(r.single AND b.single) AS single
    FROM sides AS r
    JOIN rows AS b ON b.ck = r.base_ck AND b.qid = r.qid
    GROUP BY GROUPING SETS ((r.pair_id, r.src, r.vid), (r.pair_id, r.vid))
),
totals AS (
    SELECT pair_id, src, {{ clustered_totals('diff') }},
           sum(n_only_run) AS n_only_run, sum(n_only_base) AS n_only_base,
           bool_and(single) AS single
    FROM per_video GROUP BY pair_id, src
),
computed AS (
    SELECT pair_id, src, CAST(diff_n AS BIGINT) AS n_common, diff_s / diff_n AS accuracy_diff,
           {{ clustered_se('diff') }} AS diff_se, diff_clusters - 1 AS diff_df,
           CASE WHEN diff_n >= 2 THEN {{ finite_or_null(
               'sqrt(greatest(0.0, (diff_q - diff_s * diff_s / diff_n) / (diff_n - 1)))') }}
           END AS diff_sd, CAST(diff_clusters AS BIGINT) AS n_videos,
           CAST(n_only_run AS BIGINT) AS n_only_run, CAST(n_only_base AS BIGINT) AS n_only_base,
           single
    FROM totals
),
tested AS (
    SELECT *, {{ t_two_sided_p('c.diff_t', 'c.diff_df') }} AS p_value,
           CASE WHEN single THEN {{ binom_half_two_sided_p('c.n_only_run',
                                                           'c.n_only_run + c.n_only_base') }}
           END AS mcnemar_p
    FROM (SELECT *, CASE WHEN diff_se = 0 THEN
                             CASE WHEN accuracy_diff = 0 THEN 0.0
                                  ELSE sign(accuracy_diff) * 'inf'::DOUBLE END
                         ELSE accuracy_diff / diff_se END AS diff_t
          FROM computed) AS c
),
both_ways AS (  -- each unordered pair as computed, and mirrored
    SELECT pair_id, src, false AS mirrored, n_common, accuracy_diff, diff_se, diff_df, p_value,
           mcnemar_p, n_only_run, n_only_base, diff_sd, n_videos
    FROM tested
    UNION ALL
    -- 0 - x, not -x: a difference of 0 stays 0, never -0
    SELECT pair_id, src, true, n_common, 0.0 - accuracy_diff, diff_se, diff_df, p_value,
           mcnemar_p, n_only_base, n_only_run, diff_sd, n_videos
    FROM tested
),
named AS (
    SELECT x.policy, x.run_id, x.step, y.run_id AS base_run_id, y.step AS base_step,
           coalesce(s.data_source, 'all') AS data_source, w.*
    FROM both_ways AS w
    JOIN unordered AS u ON u.pair_id = w.pair_id
    JOIN checkpoints AS x ON x.ck = CASE WHEN w.mirrored THEN u.base_ck ELSE u.ck END
    JOIN checkpoints AS y ON y.ck = CASE WHEN w.mirrored THEN u.ck ELSE u.base_ck END
    LEFT JOIN (SELECT DISTINCT src, data_source FROM question_ids) AS s ON s.src = w.src
)
SELECT n.policy, n.run_id, n.step, n.base_run_id, n.base_step, n.data_source, n.n_common,
       n.accuracy_diff, n.diff_se,
       {{ interval('diff', 'n.accuracy_diff', 'n.diff_se', 'n.diff_df', -1, 1) }},
       n.p_value, n.mcnemar_p, n.n_only_run, n.n_only_base, n.diff_sd, n.n_videos
FROM named AS n
SEMI JOIN {{ pairs }} AS p
       ON p.policy = n.policy AND p.run_id = n.run_id AND p.step = n.step
      AND p.base_run_id = n.base_run_id AND p.base_step = n.base_step)
{%- endmacro %}
