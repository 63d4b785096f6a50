"""Reading Rynn-VP case folders into rows, with every refusal kept as a `Reject`.

A case is accepted whole or not at all: if any of its four files is missing, unreadable, fails its
checksum or (for `gt.mp4`) does not decode at both ends, the case is left out of `rvp_cases` and
each problem is recorded in `rvp_rejects`. The rest of the snapshot still flows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster_project.media.probe import decoded_image_size, probe_video_cached
from dagster_project.roots import Root
from dagster_project.rynn_vp.checksums import MEDIA_FILES
from dagster_project.rynn_vp.parsing import (
    ParseError,
    normalize_whitespace,
    parse_case_id,
    parse_interval,
)
from dagster_project.tables import Reject, raw_schema

CASE_FILES = ("gt.mp4", "gt_annotations.json", "initial.png", "task.json")
# The task.json field that carries an explicit plan (a list of step strings). The published
# release has none; a case carrying one activates PI-5 in scoring.
PLAN_FIELD = "plan"


@dataclass
class CaseRead:
    case_id: str
    row: dict[str, Any] | None = None
    intervals: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    def reject(self, rel_file: str, reason: str) -> None:
        self.rejects.append(Reject(rel_file, reason, self.case_id, "rvp_cases"))


SETTING = "RYNN_VP_SOURCE"  # names the snapshot root in reasons


def list_case_dirs(root: Path) -> tuple[list[Path], list[Reject]]:
    """The case folders `cases/<case_id>/` of the snapshot at `root`, and a reject for each entry
    there that is a link leading out of the snapshot (never followed, nothing behind it listed).
    A link that stays inside is followed."""
    walls = Root(root, SETTING)
    cases = root / "cases"
    why = walls.escape(cases)
    if why is not None:
        return [], [Reject("cases", why, None, "rvp_cases")]
    if not cases.is_dir():
        return [], []
    inside, escapes = walls.entries(cases)
    rejects = [Reject(e.rel, e.reason, Path(e.rel).name, "rvp_cases") for e in escapes]
    return [p for p in inside if p.is_dir()], rejects


def _walls(case_dir: Path) -> Root:
    """The snapshot root of a case folder (`<root>/cases/<case_id>`, as `list_case_dirs` gives
    it)."""
    return Root(case_dir.parent.parent, SETTING)


def _load_json(path: Path, rel: str, read: CaseRead) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        read.reject(rel, "file is missing")
    except UnicodeDecodeError as exc:
        read.reject(rel, f"not UTF-8 text: {exc}")
    except json.JSONDecodeError as exc:
        read.reject(rel, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except OSError as exc:  # a folder under the file's name, no permission, ...
        read.reject(rel, f"cannot read: {exc.strerror or exc}")
    return None


def read_case(case_dir: Path, *, media_expected: bool = True) -> CaseRead:
    """Parse one `cases/<case_id>/` folder (structure, task.json, gt_annotations.json)."""
    case_id = case_dir.name
    rel_dir = f"cases/{case_id}"
    read = CaseRead(case_id=case_id)

    inside, escapes = _walls(case_dir).entries(case_dir)
    for e in escapes:
        read.reject(e.rel, e.reason)  # never read: neither present nor missing below
    escaped = {Path(e.rel).name for e in escapes}
    present = [p.name for p in inside if not p.name.startswith(".")]
    for name in present:
        if name not in CASE_FILES:
            read.reject(f"{rel_dir}/{name}", "unexpected file in a case folder "
                        f"(a case holds exactly {', '.join(CASE_FILES)})")
    for name in CASE_FILES:
        if name not in present and name not in escaped and (media_expected
                                                            or name not in MEDIA_FILES):
            read.reject(f"{rel_dir}/{name}", "file is missing")

    try:
        ids = parse_case_id(case_id)
    except ParseError as exc:
        read.reject(rel_dir, str(exc))
        ids = None

    task = _load_json(case_dir / "task.json", f"{rel_dir}/task.json", read) \
        if "task.json" in present else None
    instruction = plan = None
    if task is not None:
        if not isinstance(task, dict):
            read.reject(f"{rel_dir}/task.json", "top level is not a JSON object")
        else:
            task_id, instruction = task.get("task_id"), task.get("instruction")
            if not isinstance(task_id, str):
                read.reject(f"{rel_dir}/task.json", "field 'task_id' is missing or not a string")
            elif task_id != case_id:
                read.reject(f"{rel_dir}/task.json",
                            f"task_id {task_id!r} differs from its folder name {case_id!r}")
            if not isinstance(instruction, str) or not instruction.strip():
                read.reject(f"{rel_dir}/task.json", "field 'instruction' is missing or empty")
                instruction = None
            if PLAN_FIELD in task:
                plan = task[PLAN_FIELD]
                if not (isinstance(plan, list) and plan
                        and all(isinstance(s, str) and s.strip() for s in plan)):
                    read.reject(f"{rel_dir}/task.json",
                                f"field '{PLAN_FIELD}' must be a non-empty list of step strings")
                    plan = None

    ann = _load_json(case_dir / "gt_annotations.json", f"{rel_dir}/gt_annotations.json", read) \
        if "gt_annotations.json" in present else None
    ann_task = ann_video = None
    if ann is not None:
        rel = f"{rel_dir}/gt_annotations.json"
        if not isinstance(ann, dict):
            read.reject(rel, "top level is not a JSON object")
        else:
            planning, ann_task, ann_video = ann.get("planning"), ann.get("task"), ann.get("video")
            if not isinstance(ann_task, str):
                read.reject(rel, "field 'task' is missing or not a string")
            if not isinstance(planning, dict) or not planning:
                read.reject(rel, "field 'planning' is missing, empty or not an object")
            else:
                # json.loads keeps object insertion order: that order is the annotation order.
                for ordinal, (interval, label) in enumerate(planning.items(), start=1):
                    try:
                        start_s, end_s = parse_interval(interval)
                    except ParseError as exc:
                        read.reject(rel, f"planning entry {ordinal}: {exc}")
                        continue
                    if not isinstance(label, str):
                        read.reject(rel, f"planning entry {ordinal} ({interval}): label is not "
                                         "a string")
                        continue
                    read.intervals.append({
                        "case_id": case_id, "ordinal": ordinal, "interval": interval,
                        "start_s": start_s, "end_s": end_s, "label": label,
                    })

    if read.rejects or ids is None:
        read.intervals = []
        return read
    read.row = {
        "case_id": case_id,
        "instruction": instruction,
        "source_group": ids.source_group,
        "scene": ids.scene,
        "room_id": ids.room_id,
        "room_no": ids.room_no,
        "task_no": ids.task_no,
        "variant_no": ids.variant_no,
        "instance_no": ids.instance_no,
        "annotation_task_raw": ann_task,
        "annotation_task_normalized": normalize_whitespace(ann_task or ""),
        "annotation_video": ann_video if isinstance(ann_video, str) else None,
        "has_explicit_plan": plan is not None,
        "plan": plan,
        "n_intervals": len(read.intervals),
    }
    return read


# raw_rvp_media: the probe of every gt.mp4 and the size of initial.png
MEDIA_SCHEMA = raw_schema("rvp_media")


def probe_case(case_dir: Path, file_cache: Path | None = None
               ) -> tuple[dict | None, list[Reject]]:
    """The rvp_media row of a case (its GT video probed, remembered per file identity in
    `file_cache`: an unchanged gt.mp4 is not read again) and its rejects."""
    case_id = case_dir.name
    rel = f"cases/{case_id}"
    walls = _walls(case_dir)
    # A file behind a link leading out of the snapshot is never probed (rvp_cases says why).
    video, image = (p if walls.inside(p) and p.exists() else None
                    for p in (case_dir / "gt.mp4", case_dir / "initial.png"))
    if video is None and image is None:
        return None, []  # metadata-only snapshot, or a missing file rvp_cases reports
    rejects: list[Reject] = []
    row: dict = {"case_id": case_id, "source_file": f"{rel}/gt.mp4", "ok": False}
    if video is not None:
        probe = probe_video_cached(video, file_cache)
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
    if image is not None:
        try:
            # a full decode: the card says every initial image was decoded
            width, height = decoded_image_size(image, file_cache)
            row.update(initial_width=width, initial_height=height,
                       initial_size_bytes=image.stat().st_size)
        except (OSError, SyntaxError, ValueError) as exc:
            row["ok"] = False
            rejects.append(Reject(f"{rel}/initial.png", f"image does not decode: {exc}",
                                  case_id, "rvp_media"))
    return row, rejects




# raw_rvp_cases and raw_rvp_intervals: accepted cases and their intervals (read_case)
CASES_SCHEMA = raw_schema("rvp_cases")
INTERVALS_SCHEMA = raw_schema("rvp_intervals")


# The stages that refuse a case as a whole, in the order they run.
CASE_STAGES = ("rvp_checksums", "rvp_media", "rvp_cases")


def read_cases(root: Path, media_expected: bool, refused: Mapping[str, str]
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Reject]]:
    """The case and interval rows of every case folder of the snapshot at `root`, and the
    rejects of its problems: a case with any problem, or `refused` by an earlier stage (a
    failed checksum, media that do not decode), is left out whole."""
    case_dirs, rejects = list_case_dirs(root)
    cases, intervals = [], []
    for case_dir in case_dirs:
        read = read_case(case_dir, media_expected=media_expected)
        rejects.extend(read.rejects)
        if read.row is not None and case_dir.name not in refused:
            cases.append(read.row)
            intervals.extend(read.intervals)
    return cases, intervals, rejects


def refused_cases(home: Path, stages: tuple[str, ...] = CASE_STAGES) -> dict[str, str]:
    """{case_id: "case refused at <stage>: <file>: <reason>"} for every case the ingest refused
    at `stages` (its first refusal, in stage order): what the candidates and judgments of such a
    case say, instead of calling it unknown, and the cases `rvp_cases` leaves out for the
    stages before it. (int_rvp_snapshot_cases names the same stages in SQL.)"""
    import pyarrow.parquet as pq

    from dagster_project.tables import table_path

    refused: dict[str, str] = {}
    for stage in stages:
        part = table_path(home, "rvp_rejects", stage)
        if not part.exists():
            continue
        rows = pq.read_table(part, columns=["source_file", "case_id", "reason"]).to_pylist()
        for r in sorted(rows, key=lambda r: (r["case_id"] or "", r["source_file"])):
            if r["case_id"] and r["case_id"] not in refused:
                refused[r["case_id"]] = (f"case refused at {stage}: {r['source_file']}: "
                                         f"{r['reason']}")
    return refused
