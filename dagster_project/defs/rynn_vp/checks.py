"""Rynn-VP invariants as asset checks."""


import dagster as dg
import polars as pl

from dagster_project.defs.resources import BenchlakeSettings, raw_key
from dagster_project.rynn_vp.evidence_parts import source_frame_budget


@dg.asset_check(asset=raw_key("rvp_checksums"))
def rvp_checksums_verified(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """Every file listed in SHA256SUMS.txt is present with its digest, and nothing is unlisted.

    ERROR (the run's command fails) when the manifest is missing or no file verifies; WARN when
    only some files fail. Either way the cases whose files fail are rejected whole by rvp_cases,
    with the reason, and the rest flows on. Not blocking: one dbt step builds the views of both
    suites, and a blocked step would leave even the rejects view, which says why, unbuilt.
    """
    df = pl.read_parquet(benchlake.table_path("rvp_checksums"))
    counts = dict(df.group_by("status").len().iter_rows())
    bad = df.filter(pl.col("status").is_in(["mismatch", "missing", "unlisted"]))
    verified = counts.get("ok", 0)
    if bad.height == 0 and verified > 0:
        return dg.AssetCheckResult(passed=True, metadata={"status_counts": counts})
    severity = dg.AssetCheckSeverity.ERROR if verified == 0 else dg.AssetCheckSeverity.WARN
    listing = "\n".join(f"- `{r}`: {s}" for r, s in bad.select("rel_path", "status").head(50)
                        .iter_rows())
    return dg.AssetCheckResult(
        passed=False,
        severity=severity,
        description=f"{bad.height} file(s) failed verification, {verified} verified",
        metadata={"status_counts": counts, "failures": dg.MetadataValue.md(listing or "-")},
    )


@dg.asset_check(asset=raw_key("rvp_intervals"))
def rvp_intervals_per_case_in_range(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """The card's range: every case has 6 to 24 planning intervals (WARN otherwise)."""
    df = pl.read_parquet(benchlake.table_path("rvp_intervals"))
    per_case = df.group_by("case_id").len()
    outside = per_case.filter((pl.col("len") < 6) | (pl.col("len") > 24))
    return dg.AssetCheckResult(
        passed=outside.height == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"cases": per_case.height, "outside_6_24": outside.height,
                  "min": int(per_case["len"].min() or 0), "max": int(per_case["len"].max() or 0)},
    )


@dg.asset_check(asset=raw_key("rvp_media"))
def rvp_media_decodes_at_both_ends(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """Like the release's staging: the first and last frame of every GT video decode."""
    df = pl.read_parquet(benchlake.table_path("rvp_media"))
    bad = df.filter(~pl.col("ok"))
    return dg.AssetCheckResult(
        passed=bad.height == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"probed": df.height, "failed": bad.height,
                  "failures": dg.MetadataValue.md("\n".join(
                      f"- `{c}`: {e}" for c, e in bad.select("case_id", "error").iter_rows()
                  ) or "-")},
    )


@dg.asset_check(asset=raw_key("rvp_evaluations"))
def rvp_evidence_within_budget(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """No evaluation uses more than the card's `MAX_SOURCE_FRAMES` (50) source frames: ERROR
    (the command fails) otherwise. Not blocking, like every check here (see
    rvp_checksums_verified). Counted again only when the table's parts changed
    (`evidence_parts.source_frame_budget`)."""
    s = benchlake.settings()
    over, worst = source_frame_budget(s.home, s.cache_dir / "source_frame_budget.json")
    return dg.AssetCheckResult(passed=not over,
                               metadata={"max_source_frames": worst, "over_budget": over})
