{#- The columns together identify a row: no two rows share the same values (NULLs compare equal,
    as in GROUP BY). Our own, so no dbt package (and no `dbt deps`) is needed. -#}
{% test unique_combination_of_columns(model, combination_of_columns) %}
SELECT {{ combination_of_columns | join(', ') }}, count(*) AS n_rows
FROM {{ model }}
GROUP BY {{ combination_of_columns | join(', ') }}
HAVING count(*) > 1
{% endtest %}
