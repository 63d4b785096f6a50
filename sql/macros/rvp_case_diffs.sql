{#- The body of the two per-case comparison views: rvp_case_diffs (two systems, one judge run:
    over = 'system') and rvp_judge_run_case_diffs (two judge runs, one system: over =
    'judge_run_id'). Per profile and case, one side's scores (pi, vr, vq, final_score) against the
    base side's and the differences (side - base).
    - Only cases both sides scored: a case missing, unusable or unjudged on either side is no
      diff and has no row (its NULL is never read as 0), so n_common is rvp_system_pairs'.
    - order_flips: the case's final_score_diff has the opposite sign of the pair's mean difference
      over its common cases (pair_final_score_diff, rvp_system_pairs' final_score_diff for two
      systems): on this case the order of the two sides is the reverse of their overall order.
      A tie on either (a zero difference) is no flip.
    - hallucinations_only / base_hallucinations_only: the hallucinations of one side's final
      judgment whose entity (trimmed, case-folded) the other side's final judgment does not
      name, as `entity @ locus`; a locus is an interval of the case or a step id of the
      candidate, so the entity is what two judgments can share. Empty lists when there are
      none. -#}
{% macro rvp_case_diffs(over) -%}
{%- set same = 'judge_run_id' if over == 'system' else 'system' -%}
WITH scored AS (
    SELECT profile, judge_run_id, modality, system, case_id, pi, vr, vq, final_score
    FROM {{ ref('rvp_candidate_scores') }}
    WHERE final_score IS NOT NULL
),
hallucinated AS (
    SELECT judge_run_id, system, case_id,
           list({'entity_key': lower(trim(entity)),
                 'shown': entity || coalesce(' @ ' || locus, '')}
                ORDER BY hallucination_no) AS found
    FROM {{ ref('rvp_hallucinations') }}
    WHERE is_final
    GROUP BY ALL
),
pairs AS (
    SELECT a.profile, a.{{ same }}, a.{{ over }}, b.{{ over }} AS base_{{ over }}, a.modality,
           a.case_id,
           {%- for s in ['final_score', 'pi', 'vr', 'vq'] %}
           a.{{ s }}, b.{{ s }} AS base_{{ s }}, a.{{ s }} - b.{{ s }} AS {{ s }}_diff,
           {%- endfor %}
           count(*) OVER pair AS n_common,
           avg(a.final_score - b.final_score ORDER BY a.final_score - b.final_score)
               OVER pair AS pair_final_score_diff
    FROM scored AS a
    JOIN scored AS b ON b.profile = a.profile AND b.{{ same }} = a.{{ same }}
                    AND b.modality = a.modality AND b.case_id = a.case_id
                    AND b.{{ over }} <> a.{{ over }}
    WINDOW pair AS (PARTITION BY a.profile, a.{{ same }}, a.modality, a.{{ over }},
                                 b.{{ over }})
)
SELECT p.profile, p.judge_run_id, {{ 'p.base_judge_run_id, ' if over != 'system' }}p.modality,
       p.system, {{ 'p.base_system, ' if over == 'system' }}p.case_id,
       p.final_score, p.base_final_score, p.final_score_diff,
       p.pi, p.base_pi, p.pi_diff, p.vr, p.base_vr, p.vr_diff, p.vq, p.base_vq, p.vq_diff,
       p.n_common, p.pair_final_score_diff,
       sign(p.final_score_diff) * sign(p.pair_final_score_diff) < 0 AS order_flips,
       {%- for mine, theirs, name in [('a', 'b', 'hallucinations_only'),
                                      ('b', 'a', 'base_hallucinations_only')] %}
       list_transform(
           list_filter(coalesce({{ mine }}.found, []),
                       lambda h: NOT list_contains(
                           list_transform(coalesce({{ theirs }}.found, []),
                                          lambda o: o.entity_key),
                           h.entity_key)),
           lambda h: h.shown) AS {{ name }}{{ ',' if not loop.last }}
       {%- endfor %}
FROM pairs AS p
LEFT JOIN hallucinated AS a
       ON a.judge_run_id = p.judge_run_id AND a.system = p.system AND a.case_id = p.case_id
LEFT JOIN hallucinated AS b
       ON b.judge_run_id = p.{{ 'base_judge_run_id' if over != 'system' else 'judge_run_id' }}
      AND b.system = p.{{ 'base_system' if over == 'system' else 'system' }}
      AND b.case_id = p.case_id
ORDER BY p.profile, p.judge_run_id, {{ 'p.base_judge_run_id, ' if over != 'system' }}p.modality,
         p.system, {{ 'p.base_system, ' if over == 'system' }}p.case_id
{%- endmacro %}
