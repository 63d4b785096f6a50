"""videorl-video-val ingestion: parquets → questions (remapped video paths) → video probes →
the frame plan qwen-vl-utils 0.0.14 would compute.

The source parquets are only read, never modified: the remapped paths are new columns.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import pyarrow as pa

from dagster_project.demo import ensure_video_val_demo
from dagster_project.frame_plan import plan_video
from dagster_project.media.probe import probe_video
from dagster_project.resources import BenchlakeSettings, write_and_describe
from dagster_project.tables import path_field, rows_to_table, write_table
from dagster_project.video_val.read import (
    inside_roots,
    parse_prefix_map,
    read_val_parquet,
    remap_uri,
    video_roots,
)
from dagster_project.video_val.schema import SOURCES
from dagster_project.video_val.source import acquire_val_source

GROUP = "video_val"

SOURCE_SCHEMA = pa.schema([
    path_field("source"), path_field("local_path"), ("hub_repo_id", pa.string()),
    ("requested_revision", pa.string()), ("resolved_revision", pa.string()),
    ("file_name", pa.string()), ("data_source", pa.string()), path_field("file_path"),
])
OPTION = pa.struct([("letter", pa.string()), ("text", pa.string())])
QUESTIONS_SCHEMA = pa.schema([
    ("uid", pa.string()), ("data_source", pa.string()), ("row_index", pa.int64()),
    ("question", pa.string()), ("option_letters", pa.string()), ("options", pa.list_(OPTION)),
    ("n_options", pa.int32()), ("ground_truth", pa.string()), ("reward_style", pa.string()),
    ("ability", pa.string()), ("system_prompt", pa.string()), ("user_prompt", pa.string()),
    ("reward_type", pa.string()), ("answer", pa.string()), ("task", pa.string()),
    ("category", pa.string()), ("question_type", pa.string()), ("subject", pa.string()),
    ("source_id", pa.string()), ("video_uri", pa.string()), path_field("video_path"),
    ("prefix_matched", pa.bool_()), ("video_in_roots", pa.bool_()),
    ("video_exists", pa.bool_()), ("fps", pa.float64()),
    ("max_frames", pa.int64()), ("min_pixels", pa.int64()), ("max_pixels", pa.int64()),
    ("source_file", pa.string()), ("source_fingerprint", pa.string()),
    ("extra_columns", pa.string()),
])
VAL_REJECTS_SCHEMA = pa.schema([
    ("source_file", pa.string()), ("row_index", pa.int64()), ("uid", pa.string()),
    ("action", pa.string()), ("reason", pa.string()), ("raw", pa.string()),
])
VIDEOS_SCHEMA = pa.schema([
    path_field("video_path"), ("n_rows", pa.int64()), ("ok", pa.bool_()),
    ("error", pa.string()), ("codec", pa.string()), ("width", pa.int32()),
    ("height", pa.int32()), ("fps", pa.float64()), ("duration_s", pa.float64()),
    ("frame_count", pa.int64()), ("first_frame_s", pa.float64()),
    ("last_frame_s", pa.float64()), ("first_frame_decodes", pa.bool_()),
    ("last_frame_decodes", pa.bool_()), ("size_bytes", pa.int64()),
])
FRAME_PLAN_SCHEMA = pa.schema([
    path_field("video_path"), ("fps", pa.float64()), ("max_frames", pa.int64()),
    ("min_pixels", pa.int64()), ("max_pixels", pa.int64()), ("patch_size", pa.int32()),
    ("total_frames", pa.int64()), ("video_fps", pa.float64()), ("height", pa.int32()),
    ("width", pa.int32()), ("nframes", pa.int64()), ("frame_indices", pa.list_(pa.int64())),
    ("sample_fps", pa.float64()), ("resized_height", pa.int32()),
    ("resized_width", pa.int32()), ("max_pixels_used", pa.float64()), ("error", pa.string()),
])




def _write_val_rejects(benchlake: BenchlakeSettings, stage: str, rejects: list[dict]) -> None:
    rows = sorted(rejects, key=lambda r: (r["source_file"] or "", r["row_index"] or -1,
                                          r["reason"]))
    write_table(rows_to_table(rows, VAL_REJECTS_SCHEMA),
                benchlake.settings().tables_dir / "vv_rejects" / f"{stage}.parquet")


@dg.asset(group_name=GROUP, kinds={"parquet"})
def vv_source(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Where the val parquets come from: a folder (any subset of the three files) or
    `hf://datasets/<repo>@<rev>` (parquets and docs only; the revision is pinned and recorded)."""
    s = benchlake.settings()
    ensure_video_val_demo(s)
    src = acquire_val_source(s.video_val_source_or_demo(), s.hub_cache_dir)
    if not src.files:
        raise dg.Failure(f"VIDEO_VAL_SOURCE {src.local_path}: none of "
                         f"{', '.join(SOURCES)} found")
    base = {k: getattr(src, k) for k in ("source", "local_path", "hub_repo_id",
                                         "requested_revision", "resolved_revision")}
    rows = [{**base, "file_name": name, "data_source": SOURCES[name], "file_path": path}
            for name, path in sorted(src.files.items())]
    for name in src.unknown_files:
        context.log.warning(f"{name}: not one of the published parquet names; ignored")
    return write_and_describe(benchlake, "vv_source", rows_to_table(rows, SOURCE_SCHEMA),
                              unknown_files=dg.MetadataValue.json(src.unknown_files))


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=[vv_source])
def vv_questions(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """One row per accepted parquet row (`uid = <data_source>:<row_index>`): question text and
    option letters parsed from the user message, ground truth, extra_info flattened, video
    settings, source file and fingerprint, and the video path remapped per
    VIDEO_VAL_PREFIX_MAP (new columns; the parquets are never modified)."""
    s = benchlake.settings()
    prefix_map = parse_prefix_map(s.video_val_prefix_map_or_demo())
    roots = video_roots(prefix_map, s.video_val_roots)
    if not roots:
        context.log.warning("no video roots: set VIDEO_VAL_ROOTS or VIDEO_VAL_PREFIX_MAP; no "
                            "val video is opened until then")
    rows, rejects = [], []
    for src in benchlake.read("vv_source").to_pylist():
        result = read_val_parquet(Path(src["file_path"]), src["data_source"])
        rejects.extend(result.rejects)
        for row in result.rows:
            path, matched = remap_uri(row["video_uri"], prefix_map)
            # Only a path inside a configured root is ever looked at (stat'ed, probed).
            in_roots = path is not None and inside_roots(path, roots)
            row.update(video_path=path, prefix_matched=matched, video_in_roots=in_roots,
                       video_exists=in_roots and Path(path).is_file())
            rows.append(row)
    rows.sort(key=lambda r: (r["data_source"], r["row_index"]))
    _write_val_rejects(benchlake, "vv_questions", rejects)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["data_source"]] = counts.get(r["data_source"], 0) + 1
    return write_and_describe(benchlake, "vv_questions", rows_to_table(rows, QUESTIONS_SCHEMA),
                              rows_per_source=dg.MetadataValue.json(counts),
                              rejects=sum(r["action"] != "noted" for r in rejects),
                              notes=sum(r["action"] == "noted" for r in rejects))


def _probe_row(video_path: str, n_rows: int) -> dict:
    if not Path(video_path).is_file():
        return {"video_path": video_path, "n_rows": n_rows, "ok": False,
                "error": "video file is missing"}
    probe = probe_video(video_path)
    return {
        "video_path": video_path, "n_rows": n_rows, "ok": probe.ok, "error": probe.error,
        "codec": probe.codec, "width": probe.width, "height": probe.height, "fps": probe.fps,
        "duration_s": probe.metadata_duration_s, "frame_count": probe.frame_count,
        "first_frame_s": probe.first_frame_s, "last_frame_s": probe.last_frame_s,
        "first_frame_decodes": probe.first_frame_decodes,
        "last_frame_decodes": probe.last_frame_decodes, "size_bytes": probe.size_bytes,
    }


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=[vv_questions])
def vv_videos(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """One PyAV probe per distinct (remapped) video inside the video roots, the same probe as
    rvp_media; a missing or unreadable file is a row with `ok = false` and the reason. Paths
    outside the roots are never opened (`vv_unresolved_videos` lists them)."""
    counts: dict[str, int] = {}
    for q in benchlake.read("vv_questions").to_pylist():
        if q["video_in_roots"]:
            counts[q["video_path"]] = counts.get(q["video_path"], 0) + 1
    with ThreadPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(lambda p: _probe_row(p, counts[p]), sorted(counts)))
    return write_and_describe(benchlake, "vv_videos", rows_to_table(rows, VIDEOS_SCHEMA),
                              failed=sum(not r["ok"] for r in rows))


class FramePlanConfig(dg.Config):
    patch_size: int = 14  # Qwen2.5-VL uses 14 (resize factor 28); Qwen3-VL uses 16 (factor 32)


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=[vv_videos])
def vv_frame_plan(context: dg.AssetExecutionContext, config: FramePlanConfig,
                  benchlake: BenchlakeSettings):
    """Exactly what qwen-vl-utils 0.0.14 computes for each video under its row's settings:
    nframes, the frame indices, sample_fps and the resized size. Total frames and fps come from
    the probe (demux frame count, average rate); a video that cannot be planned gets a reason."""
    videos = {v["video_path"]: v for v in benchlake.read("vv_videos").to_pylist()}
    keys = sorted({(q["video_path"], q["fps"], q["max_frames"], q["min_pixels"], q["max_pixels"])
                   for q in benchlake.read("vv_questions").to_pylist() if q["video_in_roots"]},
                  key=lambda k: tuple("" if v is None else str(v) for v in k))
    rows = []
    for path, fps, max_frames, min_pixels, max_pixels in keys:
        v = videos.get(path, {})
        row = {"video_path": path, "fps": fps, "max_frames": max_frames,
               "min_pixels": min_pixels, "max_pixels": max_pixels,
               "patch_size": config.patch_size, "total_frames": v.get("frame_count"),
               "video_fps": v.get("fps"), "height": v.get("height"), "width": v.get("width")}
        if not v.get("ok"):
            row["error"] = f"video cannot be planned: {v.get('error') or 'not probed'}"
        else:
            plan = plan_video(total_frames=v["frame_count"], video_fps=v["fps"],
                              height=v["height"], width=v["width"], fps=fps,
                              max_frames=max_frames, min_pixels=min_pixels,
                              max_pixels=max_pixels, patch_size=config.patch_size)
            row.update(nframes=plan.nframes, frame_indices=list(plan.frame_indices) or None,
                       sample_fps=plan.sample_fps, resized_height=plan.resized_height,
                       resized_width=plan.resized_width,
                       max_pixels_used=plan.max_pixels_used, error=plan.error)
        rows.append(row)
    return write_and_describe(benchlake, "vv_frame_plan", rows_to_table(rows, FRAME_PLAN_SCHEMA),
                              unplannable=sum(r.get("error") is not None for r in rows))


TABLE_KEYS = [dg.AssetKey(k) for k in ("vv_source", "vv_questions", "vv_videos", "vv_frame_plan")]
