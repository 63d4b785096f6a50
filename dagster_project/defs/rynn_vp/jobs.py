"""The Rynn-VP job the CLI launches by name: `benchlake judge`."""

import dagster as dg

from dagster_project.defs.resources import raw_key

JUDGE_JOB = "rvp_judge_job"

rvp_judge_job = dg.define_asset_job(
    JUDGE_JOB,
    selection=dg.AssetSelection.assets(raw_key("rvp_judge_packets"), raw_key("rvp_judge_calls"),
                                       raw_key("rvp_judge_rejects")),
    config={"ops": {"rvp_judge": {"config": {"send": True}}}},
    description="`benchlake judge`: the judge packets brought up to date, then every evaluation "
    "whose packets are current judged through JUDGE_BASE_URL (cached answers are not asked "
    "again); the records land in $BENCHLAKE_HOME/judge/judgments/ for the judgments ingest.",
)
