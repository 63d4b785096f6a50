{#- The metric columns of rvp_judgments: exactly the `column`s of the seed rvp_metrics (pi_1 …
    pi_6, vr_1 … vr_8, vq, vq_d1 … vq_d7 today), the one list of metrics. A DuckDB COLUMNS()
    expression, so views take every listed column the judgments table carries, in the table's
    order: a new metric is a row of rvp_metrics plus its rows of rvp_metric_weights, not an edit
    of each view. The whole name is capture group 1, so an expression over it can keep the
    column's name with AS "\1". The names are plain identifiers (a test of rvp_metrics), safe in
    a regex as they are. -#}
{% macro rvp_metric_columns() -%}
{%- set columns = [] -%}
{%- for metric in seed_rows('rvp_metrics') -%}
  {%- do columns.append(metric['column']) -%}
{%- endfor -%}
COLUMNS('^({{ columns | join("|") }})$')
{%- endmacro %}
