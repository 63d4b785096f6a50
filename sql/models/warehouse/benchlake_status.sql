-- Per table: the run that last wrote it whole, and whether a later run started writing it and
-- did not finish (failed, killed, or still running). An `incomplete` table serves what an
-- earlier run wrote (or nothing, `rows` NULL): the markers are written by
-- `dagster_project/status.py`, when the step that writes the table starts and after its last
-- file is renamed into place.
SELECT
    table_name,
    CASE WHEN written_run_id IS NOT NULL AND written_run_id = started_run_id THEN 'complete'
         ELSE 'incomplete' END AS status,
    written_run_id,
    CAST(written_at AS TIMESTAMPTZ) AS written_at,
    rows,
    started_run_id AS last_started_run_id,
    CAST(started_at AS TIMESTAMPTZ) AS last_started_at
FROM {{ source('warehouse_raw', 'status_markers') }}
