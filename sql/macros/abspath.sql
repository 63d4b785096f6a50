{#- The absolute path of a stored path column. Path columns are stored relative to BENCHLAKE_HOME
    when they lie inside it (so a home can be moved or copied as is); absolute paths and URIs
    (anything with ://) are stored as given; NULL stays NULL. `col` is a column name, as a
    string: {{ abspath('image_path') }}. BENCHLAKE_HOME is an absolute path whenever dbt runs. -#}
{% macro abspath(col) -%}
{%- set home = env_var('BENCHLAKE_HOME').rstrip('/') | replace("'", "''") -%}
CASE WHEN {{ col }} IS NULL OR {{ col }} LIKE '/%' OR {{ col }} LIKE '%://%' THEN {{ col }} ELSE '{{ home }}/' || {{ col }} END
{%- endmacro %}
