"""Rynn-VP ingestion: snapshot → checksums → media probe → cases and intervals.

Each asset writes its own Parquet under `$BENCHLAKE_HOME/tables/` (named after the asset) and its
refusals under `tables/rvp_rejects/<asset>.parquet`; the SQL in `sql/rynn_vp/` does the rest.
"""


import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from dagster_project.checksums import (
    ManifestError,
    ManifestProblem,
    hash_progress_bar,
    manifest_total_bytes,
    parse_sha256sums,
    verify_snapshot,
)
from dagster_project.demo import ensure_rynn_vp_demo
from dagster_project.media.probe import probe_video
from dagster_project.resources import BenchlakeSettings, write_and_describe
from dagster_project.rynn_vp.ingest import MEDIA_FILES, list_case_dirs, read_case
from dagster_project.rynn_vp.snapshot import acquire_snapshot
from dagster_project.tables import Reject, path_field, rejects_table, rows_to_table, write_table

GROUP = "rynn_vp"

SNAPSHOT_SCHEMA = pa.schema([
    path_field("source"), path_field("local_path"), ("hub_repo_id", pa.string()),
    ("requested_revision", pa.string()), ("resolved_revision", pa.string()),
    ("media_mode", pa.string()),
])
CHECKSUMS_SCHEMA = pa.schema([
    ("rel_path", pa.string()), ("case_id", pa.string()), ("size_bytes", pa.int64()),
    ("expected_sha256", pa.string()), ("actual_sha256", pa.string()), ("status", pa.string()),
])
MEDIA_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("source_file", pa.string()), ("ok", pa.bool_()),
    ("error", pa.string()), ("codec", pa.string()), ("width", pa.int32()),
    ("height", pa.int32()), ("fps", pa.float64()), ("duration_s", pa.float64()),
    ("frame_count", pa.int64()), ("first_frame_s", pa.float64()),
    ("last_frame_s", pa.float64()), ("first_frame_decodes", pa.bool_()),
    ("last_frame_decodes", pa.bool_()), ("size_bytes", pa.int64()),
    ("initial_width", pa.int32()), ("initial_height", pa.int32()),
    ("initial_size_bytes", pa.int64()),
])
CASES_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("instruction", pa.string()), ("source_group", pa.string()),
    ("scene", pa.string()), ("room_id", pa.string()), ("room_no", pa.int32()),
    ("task_no", pa.int32()), ("variant_no", pa.int32()), ("instance_no", pa.int32()),
    ("annotation_task_raw", pa.string()), ("annotation_task_normalized", pa.string()),
    ("annotation_video", pa.string()), ("has_explicit_plan", pa.bool_()),
    ("plan", pa.list_(pa.string())), ("n_intervals", pa.int32()),
])
INTERVALS_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("ordinal", pa.int32()), ("interval", pa.string()),
    ("start_s", pa.float64()), ("end_s", pa.float64()), ("label", pa.string()),
])


def _case_of(rel_path: str) -> str | None:
    parts = rel_path.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "cases" else None


def snapshot_root(benchlake: BenchlakeSettings) -> tuple[Path, str]:
    """(local folder, media mode) of the acquired snapshot, as `rvp_snapshot` recorded it."""
    row = benchlake.read("rvp_snapshot").to_pylist()[0]
    return Path(row["local_path"]), row["media_mode"]


def _write_rejects(benchlake: BenchlakeSettings, stage: str, rejects: list[Reject]) -> int:
    write_table(rejects_table(rejects), benchlake.settings().tables_dir / "rvp_rejects"
                / f"{stage}.parquet")
    return len(rejects)


@dg.asset(group_name=GROUP, kinds={"parquet"})
def rvp_snapshot(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The Rynn-VP snapshot to read: a local folder or `hf://datasets/<repo>@<rev>` (downloaded
    with huggingface_hub, limited to metadata when RYNN_VP_MEDIA=metadata). Records the source
    and the revision actually resolved."""
    s = benchlake.settings()
    ensure_rynn_vp_demo(s)
    snap = acquire_snapshot(s.rynn_vp_source_or_demo(), s.rynn_vp_media, s.hub_cache_dir)
    context.log.info(f"snapshot at {snap.local_path} (revision {snap.resolved_revision})")
    table = rows_to_table([dataclasses.asdict(snap)], SNAPSHOT_SCHEMA)
    return write_and_describe(benchlake, "rvp_snapshot", table,
                              resolved_revision=snap.resolved_revision or "local folder")


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=[rvp_snapshot])
def rvp_checksums(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every file of the snapshot against SHA256SUMS.txt (streamed, in parallel, with a progress
    bar): ok, mismatch, missing, not_downloaded (metadata mode) or unlisted."""
    root, media_mode = snapshot_root(benchlake)

    def absent_ok(rel: str) -> bool:
        return media_mode == "metadata" and rel.rsplit("/", 1)[-1] in MEDIA_FILES

    rejects: list[Reject] = []

    def on_problem(problem: ManifestProblem) -> None:
        rejects.append(Reject("SHA256SUMS.txt", f"line {problem.line_no}: {problem.reason}: "
                              f"{problem.text!r}", None, "rvp_checksums"))

    try:
        listed, _ = parse_sha256sums(root / "SHA256SUMS.txt")
        with hash_progress_bar(manifest_total_bytes(root, list(listed))) as progress:
            statuses = verify_snapshot(root, absent_ok=absent_ok, progress=progress,
                                       on_problem=on_problem)
    except ManifestError as exc:
        # Without a manifest nothing can be verified: every file is unlisted, and the blocking
        # check stops the downstream assets.
        context.log.error(str(exc))
        rejects.append(Reject("SHA256SUMS.txt", str(exc), None, "rvp_checksums"))
        statuses = []
    rows = [
        {**dataclasses.asdict(st), "case_id": _case_of(st.rel_path)} for st in statuses
    ]
    reasons = {
        "mismatch": "SHA-256 differs from SHA256SUMS.txt",
        "missing": "listed in SHA256SUMS.txt but missing",
        "unlisted": "present but not listed in SHA256SUMS.txt",
    }
    for row in rows:
        if row["status"] in reasons:
            rejects.append(Reject(row["rel_path"], reasons[row["status"]], row["case_id"],
                                  "rvp_checksums"))
    n_rejects = _write_rejects(benchlake, "rvp_checksums", rejects)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    table = rows_to_table(rows, CHECKSUMS_SCHEMA)
    return write_and_describe(benchlake, "rvp_checksums", table,
                              status_counts=dg.MetadataValue.json(counts),
                              manifest_found=not any(r.source_file == "SHA256SUMS.txt"
                                                     for r in rejects),
                              rejects=n_rejects)


def _probe_case(case_dir: Path, root: Path) -> tuple[dict | None, list[Reject]]:
    case_id = case_dir.name
    rel = f"cases/{case_id}"
    video, image = case_dir / "gt.mp4", case_dir / "initial.png"
    if not video.exists() and not image.exists():
        return None, []  # metadata-only snapshot, or a missing file rvp_cases reports
    rejects: list[Reject] = []
    row: dict = {"case_id": case_id, "source_file": f"{rel}/gt.mp4", "ok": False}
    if video.exists():
        probe = probe_video(video)
        row.update({
            "ok": probe.ok, "error": probe.error, "codec": probe.codec, "width": probe.width,
            "height": probe.height, "fps": probe.fps, "duration_s": probe.metadata_duration_s,
            "frame_count": probe.frame_count, "first_frame_s": probe.first_frame_s,
            "last_frame_s": probe.last_frame_s, "first_frame_decodes": probe.first_frame_decodes,
            "last_frame_decodes": probe.last_frame_decodes, "size_bytes": probe.size_bytes,
        })
        if not probe.ok:
            rejects.append(Reject(f"{rel}/gt.mp4", f"video probe failed: {probe.error}",
                                  case_id, "rvp_media"))
    if image.exists():
        try:
            with Image.open(image) as im:
                im.load()  # a full decode: the card says every initial image was decoded
                row.update(initial_width=im.width, initial_height=im.height,
                           initial_size_bytes=image.stat().st_size)
        except (OSError, SyntaxError, ValueError) as exc:
            row["ok"] = False
            rejects.append(Reject(f"{rel}/initial.png", f"image does not decode: {exc}",
                                  case_id, "rvp_media"))
    return row, rejects


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=[rvp_checksums])
def rvp_media(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """A PyAV probe of every gt.mp4 without a full decode (metadata duration, decodable range,
    fps, frame count, size, codec, first/last frame decode) and the size of initial.png."""
    root, _ = snapshot_root(benchlake)
    rows, rejects = [], []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for row, rej in pool.map(lambda d: _probe_case(d, root), list_case_dirs(root)):
            if row is not None:
                rows.append(row)
            rejects.extend(rej)
    _write_rejects(benchlake, "rvp_media", rejects)
    table = rows_to_table(rows, MEDIA_SCHEMA)
    return write_and_describe(benchlake, "rvp_media", table, rejects=len(rejects))


@dg.multi_asset(
    group_name=GROUP,
    specs=[
        dg.AssetSpec("rvp_cases", deps=["rvp_checksums", "rvp_media"], kinds={"parquet"},
                     description="Accepted cases: the case id parsed, the instruction, the "
                     "annotation task raw and normalized, the explicit plan if any."),
        dg.AssetSpec("rvp_intervals", deps=["rvp_checksums", "rvp_media"], kinds={"parquet"},
                     description="Planning intervals of accepted cases in JSON order."),
    ],
)
def rvp_cases_and_intervals(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Parses every case folder. A case with any problem here, a failed checksum, or media that
    does not decode is left out whole; each problem is in rvp_rejects."""
    root, media_mode = snapshot_root(benchlake)
    tables = benchlake.settings().tables_dir
    bad_elsewhere = set()
    for stage in ("rvp_checksums", "rvp_media"):
        for r in pq.read_table(tables / "rvp_rejects" / f"{stage}.parquet").to_pylist():
            bad_elsewhere.add(r["case_id"])
    cases, intervals, rejects = [], [], []
    for case_dir in list_case_dirs(root):
        read = read_case(case_dir, media_expected=media_mode == "full")
        rejects.extend(read.rejects)
        if read.row is not None and case_dir.name not in bad_elsewhere:
            cases.append(read.row)
            intervals.extend(read.intervals)
    if not cases:
        context.log.warning(f"no case of {root} was accepted; see rvp_rejects")
    _write_rejects(benchlake, "rvp_cases", rejects)
    yield write_and_describe(benchlake, "rvp_cases", rows_to_table(cases, CASES_SCHEMA),
                             asset_key="rvp_cases", rejects=len(rejects),
                             excluded_by_other_stages=len(bad_elsewhere - {None}))
    yield write_and_describe(benchlake, "rvp_intervals", rows_to_table(intervals, INTERVALS_SCHEMA),
                             asset_key="rvp_intervals")


TABLE_KEYS = [dg.AssetKey(k) for k in
              ("rvp_snapshot", "rvp_checksums", "rvp_media", "rvp_cases", "rvp_intervals")]
