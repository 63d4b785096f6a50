{#- The body of every Rynn-VP leaderboard view (rvp_leaderboard, rvp_by_scene,
    rvp_by_source_group): per `keys`, means over scored cases with n_scored / n_cases, then per
    score (pi, vr, vq, final_score) its standard error clustered by case (one evaluation per
    case: the CLT form) and 95 % interval clipped to 0-100, and se_method. `extra` adds
    aggregate columns to the means (the leaderboard's rank). The caller adds its ORDER BY. -#}
{% macro rvp_scores_by(keys, extra='') -%}
{%- set by = keys | join(', ') -%}
WITH means AS (
    SELECT {{ by }},
           count(final_score) AS n_scored, count(*) AS n_cases,
           avg(pi ORDER BY pi) AS pi, avg(vr ORDER BY vr) AS vr, avg(vq ORDER BY vq) AS vq,
           avg(final_score ORDER BY final_score) AS final_score,
           avg(legacy_final_score ORDER BY legacy_final_score) AS legacy_final_score
           {%- if extra %}, {{ extra }}{% endif %}
    FROM {{ ref('rvp_candidate_scores') }}
    GROUP BY {{ by }}
),
errors AS (
    SELECT * FROM {{ clustered_stats(ref('rvp_candidate_scores'), keys, 'case_id',
                                     ['pi', 'vr', 'vq', 'final_score']) }}
)
SELECT m.*,
{%- for s in ['pi', 'vr', 'vq', 'final_score'] %}
       e.{{ s }}_se,
       {{ interval(s, 'm.' ~ s, 'e.' ~ s ~ '_se', 'e.' ~ s ~ '_clusters - 1', 0, 100) }},
{%- endfor %}
       'clustered:case' AS se_method
FROM means AS m
JOIN errors AS e USING ({{ by }})
{%- endmacro %}
