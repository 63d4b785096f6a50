{#- Every row satisfies a SQL boolean expression (a NULL result passes, as in a CHECK
    constraint). On a column, the expression continues the column: `expression: "<= n_cases"`. -#}
{% test expression_is_true(model, expression, column_name=none) %}
SELECT *
FROM {{ model }}
WHERE NOT ({% if column_name %}{{ column_name }} {% endif %}{{ expression }})
{% endtest %}
