import dagster as dg

from dagster_project.defs.resources import raw_key
from dagster_project.partitions import RVP_CASE_PARTITIONS
from dagster_project.rynn_vp.evidence import EVIDENCE_TABLES

# Evidence for chosen cases, each step in its own process: what the UI launches per partition
# (or as a backfill), and what runs concurrently without sharing any file.
rvp_evidence_job = dg.define_asset_job(
    "rvp_evidence_job",
    selection=dg.AssetSelection.assets(*(raw_key(t) for t in EVIDENCE_TABLES)),
    partitions_def=RVP_CASE_PARTITIONS,
    executor_def=dg.multiprocess_executor.configured({"max_concurrent": 2}),
)
