-- Per table and partition: the run that last wrote it whole, and whether a later run started
-- writing it and did not finish (failed, killed, or still running). An `incomplete` partition
-- serves what an earlier run wrote (or nothing, `rows` NULL): the markers are written by
-- `dagster_project/status.py`, before a run starts and after each file is renamed into place.
SELECT
    table_name,
    "partition",
    CASE WHEN written_run_id IS NOT NULL AND written_run_id = started_run_id THEN 'complete'
         ELSE 'incomplete' END AS status,
    written_run_id,
    CAST(written_at AS TIMESTAMPTZ) AS written_at,
    rows,
    started_run_id AS last_started_run_id,
    CAST(started_at AS TIMESTAMPTZ) AS last_started_at
FROM read_json('{{tables}}/../status/*/*.json', format = 'unstructured', columns = {
    table_name: 'VARCHAR', "partition": 'VARCHAR', started_run_id: 'VARCHAR',
    started_at: 'VARCHAR', written_run_id: 'VARCHAR', written_at: 'VARCHAR', rows: 'BIGINT'})
