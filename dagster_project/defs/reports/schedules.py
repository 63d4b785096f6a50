"""The daily rescoring: views and exports from the Parquet already there."""

import dagster as dg

from dagster_project.defs.reports.jobs import rescoring_job

rescoring_schedule = dg.ScheduleDefinition(
    name="rescoring_daily",
    job=rescoring_job,
    cron_schedule="0 5 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
