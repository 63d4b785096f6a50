{#- Tables kept up to date one checkpoint at a time. raw vv_question_scores holds one part (file)
    per checkpoint (run_id, step), named by the key of what its rows were computed from
    (dagster_project/video_val/question_scores.py): a checkpoint whose rows change gets a part of
    a new name, and the old one is removed. A model materialized `incremental` over it keeps each
    row's `part` (stg_vv_question_scores.part) and, on each build,
      pre_hook vv_drop_gone_parts()  deletes the rows of the parts no longer there (a checkpoint
                                     rewritten by a late file, or gone);
      vv_new_parts()                 filters the question rows to the parts it does not hold yet
                                     (a list of names: DuckDB then opens only those files);
    so adding or changing a checkpoint costs O(that checkpoint), whatever the campaign. Anything
    else it reads changing (its SQL, a seed, the questions) rebuilds it from scratch: the build
    drops it first (defs/warehouse/assets.py). -#}

{% macro vv_question_parts() -%}
(SELECT parse_filename(file) AS part
 FROM glob('{{ env_var("BENCHLAKE_HOME") | replace("'", "''") }}/tables/raw/vv_question_scores/*.parquet')
 WHERE parse_filename(file) <> '_schema.parquet')
{%- endmacro %}

{% macro vv_drop_gone_parts(part='part') -%}
{%- if is_incremental() -%}
DELETE FROM {{ this }} WHERE {{ part }} NOT IN (SELECT part FROM {{ vv_question_parts() }})
{%- endif -%}
{%- endmacro %}

{#- `column IN (<the parts this table does not hold yet>)` on an incremental build, else TRUE. -#}
{% macro vv_new_parts(column='part') -%}
{%- if is_incremental() and execute -%}
{{ vv_parts_in(column, "SELECT part FROM " ~ vv_question_parts() ~ " EXCEPT SELECT part FROM "
                       ~ this ~ " ORDER BY part") }}
{%- else -%}
TRUE
{%- endif -%}
{%- endmacro %}

{#- `column IN (<the parts the query returns>)`, FALSE when it returns none. -#}
{% macro vv_parts_in(column, query) -%}
  {%- set parts = run_query(query).columns[0].values() -%}
  {%- if parts -%}
{{ column }} IN ({% for p in parts %}'{{ p | replace("'", "''") }}'{{ ', ' if not loop.last }}{% endfor %})
  {%- else -%}
FALSE
  {%- endif -%}
{%- endmacro %}

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

{#- Tables kept up to date one RUN at a time (int_vv_question_history: a question's flips and
    first right step read every checkpoint of its run, so a new checkpoint changes its run's rows,
    never another run's). A run is changed when the parts it has in raw vv_question_scores are
    not exactly those the table holds rows of (a new checkpoint, one rewritten by a late file,
    one gone, a new or a vanished run). On each build,
      pre_hook vv_drop_changed_runs()  deletes every row of a changed run;
      vv_changed_run_parts()            filters the question rows to the parts of the changed
                                        runs (a list of names: DuckDB opens only those files);
    so a new checkpoint costs its run (checkpoints x questions), whatever the campaign. dbt
    renders the model (and runs the query behind vv_changed_run_parts) before its pre_hook, so
    both see the table as the last build left it. -#}

{% macro vv_changed_runs() -%}
(WITH current_parts AS (
     SELECT DISTINCT run_id, part FROM {{ ref('stg_vv_question_scores') }}),
 held_parts AS (SELECT DISTINCT run_id, part FROM {{ this }})
 SELECT run_id FROM (SELECT * FROM current_parts EXCEPT SELECT * FROM held_parts)
 UNION
 SELECT run_id FROM (SELECT * FROM held_parts EXCEPT SELECT * FROM current_parts))
{%- endmacro %}

{% macro vv_drop_changed_runs() -%}
{%- if is_incremental() -%}
DELETE FROM {{ this }} WHERE run_id IN {{ vv_changed_runs() }}
{%- endif -%}
{%- endmacro %}

{#- `column IN (<the parts of the changed runs>)` on an incremental build, else TRUE. -#}
{% macro vv_changed_run_parts(column='part') -%}
{%- if is_incremental() and execute -%}
{{ vv_parts_in(column, "SELECT DISTINCT part FROM " ~ ref('stg_vv_question_scores')
                       ~ " WHERE run_id IN " ~ vv_changed_runs() ~ " ORDER BY part") }}
{%- else -%}
TRUE
{%- endif -%}
{%- endmacro %}
