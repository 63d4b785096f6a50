-- Every weight row names a metric of rvp_metrics, on that metric's axis: a weight for a metric
-- the judgments table has no column for would silently never count. Returns the rows that don't.
-- It reads two seeds: dagster-dbt makes it a check of the one named here (a singular test with
-- two parents and no such name is no check at all, and `benchlake materialize` never ran it).
{{ config(meta={'dagster': {'ref': {'name': 'rvp_metric_weights'}}}) }}
SELECT w.*
FROM {{ ref('rvp_metric_weights') }} AS w
ANTI JOIN {{ ref('rvp_metrics') }} AS m ON m.metric = w.metric AND m.axis = w.axis
