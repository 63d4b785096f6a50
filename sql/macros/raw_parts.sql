{#- Tables kept up to date one part at a time. A raw table kept in parts (a Parquet file each)
    names every part by the key of what its rows were computed from: a part whose rows change
    gets a new name, and the old one is removed. raw vv_question_scores holds one part per
    checkpoint (dagster_project/video_val/question_scores.py), raw rvp_judgments one per segment
    of judgment files (dagster_project/rynn_vp/judgment_replay.py). A model materialized
    `incremental` over one of them keeps each row's `part` (its file's name) and, on each build,
      pre_hook drop_gone_parts(table)  deletes the rows of the parts no longer there (rewritten
                                       by a late file, or gone);
      new_parts(table)                 filters the raw rows to the parts it does not hold yet
                                       (a list of names: DuckDB then opens only those files);
    so adding or changing a part costs O(that part), whatever the campaign. Anything else it
    reads changing (its SQL, a seed, another table) rebuilds it from scratch: the build drops it
    first (defs/warehouse/assets.py; the raw tables kept so: warehouse/fingerprints.py,
    PART_SOURCES). -#}

{% macro raw_parts(table) -%}
(SELECT parse_filename(file) AS part
 FROM glob('{{ env_var("BENCHLAKE_HOME") | replace("'", "''") }}/tables/raw/{{ table }}/*.parquet')
 WHERE parse_filename(file) <> '_schema.parquet')
{%- endmacro %}

{% macro drop_gone_parts(table, part='part') -%}
{%- if is_incremental() -%}
DELETE FROM {{ this }} WHERE {{ part }} NOT IN (SELECT part FROM {{ raw_parts(table) }})
{%- endif -%}
{%- endmacro %}

{#- `column IN (<the parts of raw `table` this table does not hold yet>)` on an incremental
    build, else TRUE. -#}
{% macro new_parts(table, column='part') -%}
{%- if is_incremental() and execute -%}
{{ in_query(column, "SELECT part FROM " ~ raw_parts(table) ~ " EXCEPT SELECT part FROM "
                    ~ this ~ " ORDER BY part") }}
{%- else -%}
TRUE
{%- endif -%}
{%- endmacro %}

{#- `column IN (<the values the query returns>)`, FALSE when it returns none. -#}
{% macro in_query(column, query) -%}
{{ in_list(column, run_query(query).columns[0].values()) }}
{%- endmacro %}

{#- `column IN (<the values, quoted>)`, FALSE for no value. -#}
{% macro in_list(column, values) -%}
  {%- if values -%}
{{ column }} IN ({% for v in values %}'{{ v | replace("'", "''") }}'{{ ', ' if not loop.last }}{% endfor %})
  {%- else -%}
FALSE
  {%- endif -%}
{%- endmacro %}
