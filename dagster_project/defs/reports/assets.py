"""Reports: the exports of every mart, and the rescoring job + schedule that rebuild the catalog
and the exports for every reporting profile without re-ingesting anything."""

import dagster as dg

from dagster_project.resources import BenchlakeSettings


@dg.asset(group_name="reports", kinds={"csv", "json", "parquet"}, deps=["benchlake_catalog"])
def benchlake_exports(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every report view as CSV, Parquet, Markdown and JSON, charts as PNG and a manifest, for
    every reporting profile, into `$BENCHLAKE_HOME/exports/<timestamp>/`."""
    from dagster_project.reports import export_reports

    s = benchlake.settings()
    folder = export_reports(s.tables_dir, s.exports_dir)
    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(folder)), "files": len(files),
        "manifest": dg.MetadataValue.path(str(folder / "manifest.json")),
    })


# Changing reporting weights is not a new visual evaluation: rescoring only rebuilds the views
# (the catalog) and the exports from the Parquet already there.
rescoring_job = dg.define_asset_job(
    "rescoring_job",
    selection=dg.AssetSelection.assets("benchlake_catalog", "benchlake_exports"),
    description="Rebuild the catalog and the exports for every reporting profile; no ingest.",
)

rescoring_schedule = dg.ScheduleDefinition(
    name="rescoring_daily",
    job=rescoring_job,
    cron_schedule="0 5 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
