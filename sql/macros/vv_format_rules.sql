{#- The val format rules, from the seed vv_format_rules (the one list; Python's FORMAT_RULES is
    held equal to it by a test), so no view names a rule:
      vv_format_columns()            the scored responses' columns, one per rule (format_card, …)
      vv_format_ok(rule, relation)   the value of `rule`'s column in `relation` (an alias of a
                                     relation with every format column, or of their means): a
                                     CASE over the rules, NULL for a rule the seed lacks -#}
{% macro vv_format_columns() -%}
  {%- set columns = [] -%}
  {%- for r in seed_rows('vv_format_rules') -%}
    {%- do columns.append(r['column']) -%}
  {%- endfor -%}
  {{- return(columns) -}}
{%- endmacro %}

{% macro vv_format_ok(rule, relation) -%}
CASE {{ rule }}
{%- for r in seed_rows('vv_format_rules') %} WHEN '{{ r['rule'] }}' THEN {{ relation }}.{{ r['column'] }}
{%- endfor %} END
{%- endmacro %}
