"""Reports: the exports of every mart, for every reporting profile."""

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings
from dagster_project.warehouse.catalog import marts

# What the exports read: every mart of the dbt project (the models outside staging and
# intermediate), so the export runs after the views it writes out were rebuilt and tested.
MARTS = [dg.AssetKey(name) for name in marts()]


@dg.asset(group_name="reports", kinds={"csv", "json", "parquet"}, deps=MARTS)
def benchlake_exports(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every report view as CSV, Parquet, Markdown and JSON, charts as PNG, a manifest and the
    HTML results browser (`index.html`), for every reporting profile, into
    `$BENCHLAKE_HOME/exports/<timestamp>/`."""
    from dagster_project.reports import export_reports

    s = benchlake.settings()
    folder = export_reports(s.home, s.exports_dir)
    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(folder)), "files": len(files),
        "manifest": dg.MetadataValue.path(str(folder / "manifest.json")),
        "results_browser": dg.MetadataValue.url((folder / "index.html").as_uri()),
    })
