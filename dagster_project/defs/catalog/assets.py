"""The DuckDB catalog: views only, over the Parquet tables, rebuilt by this one asset."""


import dagster as dg

from dagster_project.catalog import broken_views, build_catalog
from dagster_project.defs.rynn_vp.assets import TABLE_KEYS as RYNN_VP_TABLES
from dagster_project.defs.rynn_vp.evidence import TABLE_KEYS as RVP_EVIDENCE_TABLES
from dagster_project.defs.rynn_vp.judging import TABLE_KEYS as RVP_JUDGING_TABLES
from dagster_project.defs.video_val.assets import TABLE_KEYS as VIDEO_VAL_TABLES
from dagster_project.defs.video_val.frames import TABLE_KEYS as VV_FRAMES_TABLES
from dagster_project.defs.video_val.scoring import TABLE_KEYS as VV_SCORING_TABLES
from dagster_project.resources import BenchlakeSettings

TABLE_ASSETS = [
    *RYNN_VP_TABLES, *RVP_EVIDENCE_TABLES, *RVP_JUDGING_TABLES,
    *VIDEO_VAL_TABLES, *VV_FRAMES_TABLES, *VV_SCORING_TABLES,
]


@dg.asset(group_name="catalog", kinds={"duckdb"}, deps=TABLE_ASSETS)
def benchlake_catalog(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """`$BENCHLAKE_HOME/benchlake.duckdb`: every view of `sql/`, nothing else (rebuildable)."""
    s = benchlake.settings()
    skipped = build_catalog(s.catalog_path, s.tables_dir)
    broken = broken_views(skipped)
    if broken:
        # A view that fails for a reason other than a not-yet-materialized table is a bug.
        raise dg.Failure(description="views failed to build", metadata={"errors": broken})
    for view, reason in skipped.items():
        context.log.info(f"view {view} skipped (input not materialized): {reason}")
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(s.catalog_path)),
        "skipped_views": dg.MetadataValue.json(skipped),
    })
