{#- Every non-NULL value lies in [min_value, max_value] (scores: 0-100 for Rynn-VP, 0-1 for the
    val suite). NULL means "not scored" and passes; not_null says otherwise where it must. -#}
{% test within_range(model, column_name, min_value, max_value) %}
SELECT *
FROM {{ model }}
WHERE {{ column_name }} < {{ min_value }} OR {{ column_name }} > {{ max_value }}
{% endtest %}
