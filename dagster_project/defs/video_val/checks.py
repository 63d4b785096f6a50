"""videorl-video-val invariants as asset checks."""

import dagster as dg
import polars as pl

from dagster_project.defs.resources import BenchlakeSettings, raw_key
from dagster_project.video_val.part_checks import (
    QUESTION_INVARIANTS,
    RESPONSE_INVARIANTS,
    SCORED_INVARIANTS,
    check_new_parts,
)


@dg.asset_check(asset=raw_key("vv_questions"))
def vv_videos_resolvable(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """Per data_source: rows whose video prefix no VIDEO_VAL_PREFIX_MAP entry matched, rows whose
    remapped path is outside the video roots (never opened), and rows whose file is missing.
    They do not stop the rest; `vv_unresolved_videos` lists them."""
    df = pl.read_parquet(benchlake.table_path("vv_questions"))
    per_source = (
        df.group_by("data_source")
        .agg(rows=pl.len(), unmatched_prefix=(~pl.col("prefix_matched")).sum(),
             outside_roots=(~pl.col("video_in_roots")).sum(),
             missing_file=(pl.col("video_in_roots") & ~pl.col("video_exists")).sum())
        .sort("data_source")
    )
    bad = per_source.filter((pl.col("outside_roots") > 0) | (pl.col("missing_file") > 0))
    return dg.AssetCheckResult(
        passed=bad.height == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={row["data_source"]: dg.MetadataValue.json(row)
                  for row in per_source.iter_rows(named=True)},
    )


@dg.asset_check(asset=raw_key("vv_frame_plan"))
def vv_frame_plan_within_bounds(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """Every plan samples an even number of frames between 4 (FPS_MIN_FRAMES) and the row's
    max_frames, indices inside the video and non-decreasing, sizes multiples of the factor."""
    df = pl.read_parquet(benchlake.table_path("vv_frame_plan")).filter(pl.col("error").is_null())
    problems = []
    for r in df.iter_rows(named=True):
        idx, factor = r["frame_indices"], 2 * r["patch_size"]
        if not (r["nframes"] % 2 == 0 and len(idx) == r["nframes"]
                and (r["max_frames"] is None or r["nframes"] <= max(r["max_frames"], 4))
                and idx[0] >= 0 and idx[-1] <= r["total_frames"] - 1
                and all(a <= b for a, b in zip(idx, idx[1:], strict=False))
                and r["resized_height"] % factor == 0 and r["resized_width"] % factor == 0):
            problems.append(r["video_path"])
    return dg.AssetCheckResult(passed=not problems, metadata={"plans": df.height,
                                                              "violations": len(problems)})


def _part_check(benchlake: BenchlakeSettings, table: str, check: str,
                invariants: dict[str, str]) -> dg.AssetCheckResult:
    found = check_new_parts(benchlake.settings().home, table, check, invariants)
    return dg.AssetCheckResult(
        passed=found.passed,
        description=None if found.passed else "; ".join(
            f"{name}: broken in {len(parts)} part(s), e.g. {parts[0]}"
            for name, parts in found.violations.items()),
        metadata={"parts_checked": found.checked, "parts_passed_before": found.already,
                  "invariants": dg.MetadataValue.md("\n".join(f"- {n}" for n in invariants))})


@dg.asset_check(asset=raw_key("vv_responses"))
def vv_response_parts_valid(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """Each new part of the parsed responses (`video_val/part_checks.py`): keys and where each
    record was read not null, each record once. A part that passed is not read again."""
    return _part_check(benchlake, "vv_responses", "vv_response_parts_valid",
                       RESPONSE_INVARIANTS)


@dg.asset_check(asset=raw_key("vv_scored_responses"))
def vv_scored_parts_valid(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """Each new scored part: as vv_response_parts_valid, and every extraction method known, a
    letter exactly when a method found one, `correct` the letter equal to the ground truth, both
    format flags set."""
    return _part_check(benchlake, "vv_scored_responses", "vv_scored_parts_valid",
                       SCORED_INVARIANTS)


@dg.asset_check(asset=raw_key("vv_question_scores"))
def vv_question_parts_valid(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """Each new checkpoint's question rows: one checkpoint per part, one row per question,
    counts within its samples."""
    return _part_check(benchlake, "vv_question_scores", "vv_question_parts_valid",
                       QUESTION_INVARIANTS)
