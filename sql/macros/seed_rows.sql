{#- The rows of a seed while compiling, for SQL whose shape they decide (which columns a view
    reads): a list of rows (agate), each indexed by column name, values as text, in file order;
    [] while dbt parses (nothing runs then).

    ref(name) makes the calling model depend on the seed, so `dbt build` loads the seed first and
    the lineage shows it. The rows themselves are read by DuckDB from the seed's CSV,
    <project dir>/seeds/<name>.csv (seed-paths in dbt_project.yml), the file `dbt seed` loads,
    not from the loaded table: compiling then needs no database where the seed was loaded (a
    `dbt compile` into an empty database; unit tests, where ref() is a fixture), and compiled SQL
    depends on the project's files only. Same file, same rows: one list. -#}
{% macro seed_rows(name) -%}
  {%- set _depends_on = ref(name) -%}
  {%- if not execute -%}
    {{- return([]) -}}
  {%- endif -%}
  {%- set path = invocation_args_dict['project_dir'] ~ '/seeds/' ~ name ~ '.csv' -%}
  {%- set table = run_query("SELECT * FROM read_csv('" ~ (path | replace("'", "''"))
                            ~ "', header = true, all_varchar = true)") -%}
  {{- return(table.rows) -}}
{%- endmacro %}
