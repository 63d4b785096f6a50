"""Rescoring: changing reporting weights is not a new visual evaluation. The job rebuilds and
tests the views (the dbt models) and writes the exports from the Parquet already there: no
ingest, no evidence decoding."""

import dagster as dg

from dagster_project.defs.reports.assets import MARTS

rescoring_job = dg.define_asset_job(
    "rescoring_job",
    selection=dg.AssetSelection.assets(*MARTS).upstream()
    - dg.AssetSelection.key_prefixes("raw") | dg.AssetSelection.assets("benchlake_exports"),
    description="Rebuild and test the views and write the exports for every reporting profile; "
    "no ingest.",
)
