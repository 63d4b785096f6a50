-- verl's validation metrics, one row per (run_id, step, data_source, metric), computed in Python
-- as verl 0.9.1 computes them (dagster_project/video_val/verl_metrics.py: a bootstrap with verl's
-- seeded draws, which SQL cannot reproduce). A dump read in several versions counts in its first,
-- as its responses do (int_vv_response_status).
SELECT run_id, step, data_source, metric, value, wandb_key, source_file, file_version
FROM {{ ref('stg_vv_verl_metrics') }}
QUALIFY dense_rank() OVER (PARTITION BY run_id, step ORDER BY source_file, file_version) = 1
