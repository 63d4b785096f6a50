{#- The val tables kept one checkpoint at a time over the parts of raw vv_question_scores (one
    per checkpoint; macros/raw_parts.sql), and the ones kept one run's tail or one run at a
    time below. -#}

{#- int_vv_pair_comparisons' pre_hook: delete every pair no longer wanted on the current parts of
    both its sides (int_vv_wanted_pairs). -#}
{% macro vv_drop_unwanted_pairs() -%}
{%- if is_incremental() -%}
DELETE FROM {{ this }} AS held WHERE NOT EXISTS (
    SELECT 1 FROM {{ ref('int_vv_wanted_pairs') }} AS w
    WHERE w.policy = held.policy AND w.run_id = held.run_id AND w.step = held.step
      AND w.base_run_id = held.base_run_id AND w.base_step = held.base_step
      AND w.part = held.part AND w.base_part = held.base_part)
{%- endif -%}
{%- endmacro %}

{#- int_vv_question_steps is kept one run's TAIL at a time: a question's previous checkpoint
    (prev_*) is the one before it in its run, so a checkpoint added, rewritten or gone changes
    the rows of its run from its step on, never an earlier one. A run's tail starts at the
    first step whose part the table does not hold, or holds and is gone (a new checkpoint, one
    rewritten by a late file, one removed, a new or a vanished run). On each build,
      pre_hook vv_drop_changed_tails()  deletes every row of a changed tail;
      vv_changed_tails()                the tails (run_id, from_step) and the current parts in
                                        them (names: DuckDB opens only those files);
    so a checkpoint appended after the others of its run costs its own rows, whatever the
    campaign and the run. dbt renders the model (and runs the query behind vv_changed_tails)
    before its pre_hook, so both see the table as the last build left it. -#}

{% macro vv_tails_query() -%}
(WITH current_parts AS (
     SELECT DISTINCT run_id, step, part FROM {{ ref('stg_vv_question_scores') }}),
 held_parts AS (SELECT DISTINCT run_id, step, part FROM {{ this }}),
 changed AS (SELECT * FROM (SELECT * FROM current_parts EXCEPT SELECT * FROM held_parts)
             UNION ALL
             SELECT * FROM (SELECT * FROM held_parts EXCEPT SELECT * FROM current_parts))
 SELECT t.run_id, t.from_step, c.part
 FROM (SELECT run_id, min(step) AS from_step FROM changed GROUP BY run_id) AS t
 LEFT JOIN current_parts AS c ON c.run_id = t.run_id AND c.step >= t.from_step)
{%- endmacro %}

{#- On an incremental build, {'runs': [[run_id, from_step], ...], 'parts': [the current parts
    of those tails]}; else none (a build from scratch reads everything). -#}
{% macro vv_changed_tails() -%}
  {%- if is_incremental() and execute -%}
    {%- set found = run_query("SELECT * FROM " ~ vv_tails_query() ~ " ORDER BY run_id, part") -%}
    {%- set runs, parts = [], [] -%}
    {%- for row in found.rows -%}
      {%- if [row[0], row[1]] not in runs -%}{%- do runs.append([row[0], row[1]]) -%}{%- endif -%}
      {%- if row[2] is not none -%}{%- do parts.append(row[2]) -%}{%- endif -%}
    {%- endfor -%}
    {{ return({'runs': runs, 'parts': parts}) }}
  {%- else -%}
    {{ return(none) }}
  {%- endif -%}
{%- endmacro %}

{#- `column IN (<the parts of the changed tails>)`, FALSE when there are none, TRUE when
    `tails` is none (a build from scratch). -#}
{% macro vv_tail_parts(tails, column='part') -%}
{{ 'TRUE' if tails is none else in_list(column, tails.parts) }}
{%- endmacro %}

{#- The changed tails as a relation t(run_id, from_step) (one row at least). -#}
{% macro vv_tails_relation(tails) -%}
(VALUES {% for run, step in tails.runs %}('{{ run | replace("'", "''") }}', {{ step }}::BIGINT){{ ', ' if not loop.last }}{% endfor %}) AS t(run_id, from_step)
{%- endmacro %}

{#- The number of this build of a table kept in batches, for its rows' `build_seq`: one more
    than any row it still holds (evaluated after the pre_hook's delete), 1 from scratch. The
    rows with the highest number are what its last build wrote: what the test
    distinct_in_last_build reads. -#}
{% macro vv_build_seq() -%}
{%- if is_incremental() -%}
(SELECT coalesce(max(build_seq), 0) + 1 FROM {{ this }})
{%- else -%}
CAST(1 AS BIGINT)
{%- endif -%}
{%- endmacro %}

{% macro vv_drop_changed_tails() -%}
{%- if is_incremental() -%}
DELETE FROM {{ this }} AS h USING (SELECT DISTINCT run_id, from_step FROM {{ vv_tails_query() }})
    AS t WHERE h.run_id = t.run_id AND h.step >= t.from_step
{%- endif -%}
{%- endmacro %}

{#- int_vv_question_runs is kept one RUN at a time: a question's first right step, its flips
    and its values at the run's best read every checkpoint of its run. Each row keeps the digest
    of its run's parts (parts_digest); a run whose parts in int_vv_question_steps have another
    digest (or that is gone from it) is changed. On each build,
      pre_hook vv_drop_changed_runs()  deletes every row of a changed run;
      vv_changed_runs_in()             filters the step rows to the changed runs (a list)
    so a new checkpoint costs one row per question of its run, and no other run's. -#}

{% macro vv_run_digests(relation) -%}
(SELECT run_id, md5(string_agg(part, ',' ORDER BY part)) AS parts_digest
 FROM (SELECT DISTINCT run_id, part FROM {{ relation }}) GROUP BY run_id)
{%- endmacro %}

{% macro vv_changed_runs() -%}
(SELECT run_id FROM (SELECT * FROM {{ vv_run_digests(ref('int_vv_question_steps')) }}
                     EXCEPT SELECT DISTINCT run_id, parts_digest FROM {{ this }})
 UNION
 SELECT run_id FROM (SELECT DISTINCT run_id FROM {{ this }}
                     EXCEPT SELECT DISTINCT run_id FROM {{ ref('int_vv_question_steps') }}))
{%- endmacro %}

{% macro vv_drop_changed_runs() -%}
{%- if is_incremental() -%}
DELETE FROM {{ this }} WHERE run_id IN {{ vv_changed_runs() }}
{%- endif -%}
{%- endmacro %}

{#- `column IN (<the changed runs>)` on an incremental build (FALSE: none), else TRUE. -#}
{% macro vv_changed_runs_in(column='run_id') -%}
{%- if is_incremental() and execute -%}
{{ in_query(column, "SELECT run_id FROM " ~ vv_changed_runs() ~ " ORDER BY run_id") }}
{%- else -%}
TRUE
{%- endif -%}
{%- endmacro %}
