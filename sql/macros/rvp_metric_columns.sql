{#- The one definition of which rvp_judgments columns are metrics: pi_<n>, vr_<n>, vq and
    vq_d<n> (their names in the records: PI-<n>, VR-<n>, VQ, VQ-D<n>). A DuckDB COLUMNS()
    expression, so views take every metric column the judgments table carries, in its order: a
    new metric is a new column there plus rows of rvp_metric_weights, not an edit of each view.
    The whole name is capture group 1, so an expression over it can keep the column's name with
    AS "\1". -#}
{% macro rvp_metric_columns() -%}
COLUMNS('^((pi|vr|vq)(_d?[0-9]+)?)$')
{%- endmacro %}
