{#- Every non-NULL value of each of `columns` lies in [min_value, max_value] (scores: 0-100 for
    Rynn-VP, 0-1 for the val suite). NULL means "not scored" and passes; not_null_columns says
    otherwise where it must. One test per table and range, one scan: each failing row is returned
    with the columns it fails on (`out_of_range`). -#}
{% test within_range(model, columns, min_value, max_value) %}
SELECT concat_ws(', ',
    {%- for c in columns %}
    CASE WHEN {{ adapter.quote(c) }} < {{ min_value }} OR {{ adapter.quote(c) }} > {{ max_value }} THEN '{{ c }}' END
    {%- if not loop.last %},{% endif %}
    {%- endfor %}) AS out_of_range, *
FROM {{ model }}
WHERE {% for c in columns %}{{ adapter.quote(c) }} < {{ min_value }} OR {{ adapter.quote(c) }} > {{ max_value }}
    {%- if not loop.last %} OR {% endif %}{% endfor %}
{% endtest %}
