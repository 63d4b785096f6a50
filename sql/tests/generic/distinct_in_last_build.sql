{#- The columns together identify a row, checked where the last build of an incremental table
    could have broken it: among the rows that share `scope` with a row that build wrote (those
    with the highest `build_column`). A build deletes what it recomputes and appends the new
    rows, so a row held twice shares its scope (e.g. the run and checkpoint of a tail) with a
    new row: this costs the rows rewritten, not the table. From scratch every row is new and
    every row is checked. (dbt runs the tests of one depth of its graph in the order of their
    names: one of these sits between an incremental table and the next, and its name comes
    before not_null_columns, unique and within_range.) -#}
{% test distinct_in_last_build(model, combination_of_columns, scope, build_column='build_seq') %}
WITH last_build AS (
    SELECT DISTINCT {{ scope | join(', ') }} FROM {{ model }}
    WHERE {{ build_column }} = (SELECT max({{ build_column }}) FROM {{ model }}))
SELECT {{ combination_of_columns | join(', ') }}, count(*) AS n_rows
FROM {{ model }} SEMI JOIN last_build USING ({{ scope | join(', ') }})
GROUP BY {{ combination_of_columns | join(', ') }}
HAVING count(*) > 1
{% endtest %}
