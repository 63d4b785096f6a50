"""Rescoring: changing a rule (a reporting profile, a metric weight, a scoring policy) is not a
new evaluation. The job rebuilds and tests the views (every dbt model), recomputes whatever else
reads a rule table (a dbt seed), and writes the exports; no ingest, no evidence decoding."""

import dagster as dg

from dagster_project.warehouse.catalog import seeds

rescoring_job = dg.define_asset_job(
    "rescoring_job",
    selection=dg.AssetSelection.assets(*(dg.AssetKey(s) for s in seeds())).downstream()
    | dg.AssetSelection.from_string("kind:dbt") | dg.AssetSelection.assets("benchlake_exports"),
    description="Rebuild and test the views, recompute what reads a rule table, and write the "
    "exports for every reporting profile; no ingest.",
)
