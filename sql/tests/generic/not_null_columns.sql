{#- None of `columns` is NULL in any row. One test per table, one scan (not a test and a scan per
    column: dbt's own cost per test node is what a changed table's checks would wait for): each
    failing row is returned with the columns that are NULL in it (`null_columns`). -#}
{% test not_null_columns(model, columns) %}
SELECT concat_ws(', ',
    {%- for c in columns %}
    CASE WHEN {{ adapter.quote(c) }} IS NULL THEN '{{ c }}' END{% if not loop.last %},{% endif %}
    {%- endfor %}) AS null_columns, *
FROM {{ model }}
WHERE {% for c in columns %}{{ adapter.quote(c) }} IS NULL{% if not loop.last %} OR {% endif %}{% endfor %}
{% endtest %}
