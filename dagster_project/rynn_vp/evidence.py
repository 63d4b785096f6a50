"""The card's evidence policy for one case, as pure functions over the case's rows.

Per evaluation (system × case) at most 50 source frames: S0 (initial.png), up to four GT anchors
from the GT video, and either 30 dense panels of a candidate video (tiled into five 2×3
storyboards) or the candidate's ordered step images. Nothing here imports Dagster.

Anchor rule (documented in the README): over the case's non-Done intervals in annotation order,
take the intervals at positions ceil(k/4), ceil(k/2), ceil(3k/4) and k (the last non-Done
action) and sample the GT video at each one's END, clamped into the decodable range; duplicates
(short plans) collapse, hence "up to four".
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from dagster_project.tables import raw_schema, stored_path

MAX_SOURCE_FRAMES = 50
N_PANELS = 30
STORYBOARD_ROWS, STORYBOARD_COLS = 2, 3
PANELS_PER_STORYBOARD = STORYBOARD_ROWS * STORYBOARD_COLS
# Evidence frames are scaled to fit this box (never up): enough for a judge, small on disk.
EVIDENCE_BOX = (640, 360)
# Steps beyond this are not shown (S0 + 4 anchors + 45 steps = 50) and the cut is recorded.
MAX_STEPS = MAX_SOURCE_FRAMES - 1 - 4


@dataclass(frozen=True)
class Anchor:
    ordinal: int  # the interval's ordinal in the annotation
    interval: str
    label: str
    requested_s: float  # the interval's raw end
    position: str  # "q1", "q2", "q3", "last"


def anchor_intervals(intervals: Sequence[dict]) -> list[Anchor]:
    """Up to four anchors from the case's intervals (dicts with ordinal, interval, end_s, label,
    is_done_label), following the rule in the module docstring."""
    actions = sorted((i for i in intervals if not i["is_done_label"]), key=lambda i: i["ordinal"])
    k = len(actions)
    if k == 0:
        return []
    picks: list[tuple[str, int]] = [
        ("q1", math.ceil(k / 4)), ("q2", math.ceil(k / 2)), ("q3", math.ceil(3 * k / 4)),
        ("last", k),
    ]
    seen: set[int] = set()
    anchors = []
    for position, n in picks:
        if n in seen:
            continue
        seen.add(n)
        a = actions[n - 1]
        anchors.append(Anchor(a["ordinal"], a["interval"], a["label"], float(a["end_s"]),
                              position))
    return anchors


def panel_indices(frame_count: int, n: int = N_PANELS) -> list[int]:
    """`n` frame indices uniform over [0, frame_count-1] (all frames when fewer: truncation)."""
    if frame_count <= 0:
        return []
    if frame_count <= n:
        return list(range(frame_count))
    return [round(i * (frame_count - 1) / (n - 1)) for i in range(n)]


def fit_size(width: int, height: int, box: tuple[int, int] = EVIDENCE_BOX) -> tuple[int, int]:
    """Scale (width, height) to fit `box` keeping the aspect ratio; never upscale; even sides."""
    scale = min(1.0, box[0] / width, box[1] / height)
    w = max(2, int(round(width * scale / 2)) * 2)
    h = max(2, int(round(height * scale / 2)) * 2)
    return w, h


def storyboard(tiles: Sequence[tuple[np.ndarray, str]], tile_size: tuple[int, int]) -> Image.Image:
    """A 2×3 sheet of equally sized RGB tiles, each labelled (e.g. "P07  3.42 s"). Missing
    tiles (a truncated candidate) stay black."""
    tw, th = tile_size
    label_h = 16
    sheet = Image.new("RGB", (STORYBOARD_COLS * tw, STORYBOARD_ROWS * (th + label_h)))
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    for i, (rgb, label) in enumerate(tiles[:PANELS_PER_STORYBOARD]):
        row, col = divmod(i, STORYBOARD_COLS)
        x, y = col * tw, row * (th + label_h)
        tile = Image.fromarray(rgb)
        if tile.size != (tw, th):
            tile = tile.resize((tw, th), Image.Resampling.BICUBIC)
        sheet.paste(tile, (x, y + label_h))
        draw.text((x + 3, y + 2), label, fill=(255, 255, 255), font=font)
    return sheet


def step_sort_key(stem: str) -> tuple[int, str]:
    return int(stem), stem


def select_steps(step_ids: Sequence[str], limit: int = MAX_STEPS) -> tuple[list[str], bool]:
    """All steps when they fit the frame budget, else `limit` of them spread evenly (first and
    last kept); returns (shown, truncated)."""
    if len(step_ids) <= limit:
        return list(step_ids), False
    picks = sorted({round(i * (len(step_ids) - 1) / (limit - 1)) for i in range(limit)})
    return [step_ids[i] for i in picks], True


# --- building one case's evidence (I/O, still no Dagster) --------------------------------


@dataclass(frozen=True)
class CaseInputs:
    """Everything one case's evidence needs, gathered by the asset from the views."""

    case_id: str
    initial_png: str
    initial_sha256: str | None
    gt_mp4: str
    gt_sha256: str | None
    first_frame_s: float
    last_frame_s: float
    intervals: list[dict]  # rvp_intervals rows of the case
    candidates: list[dict]  # rvp_candidates rows of the case (ok or not)


# Bump when anything above or in build_case_evidence changes what is extracted: every evaluation
# is then extracted again. Otherwise an evaluation whose inputs are unchanged is not decoded again.
EVIDENCE_POLICY_VERSION = "1"


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def case_fingerprint(inp: CaseInputs, home: Path | None = None) -> str:
    """What every evaluation of the case shares: the policy version, S0's and the GT video's
    paths (as stored, see `evaluation_fingerprint`) and digests, the decodable range and the
    intervals (the anchors' source)."""
    paths = [stored_path(p, home) if home is not None else p
             for p in (inp.initial_png, inp.gt_mp4)]
    return _digest([EVIDENCE_POLICY_VERSION, paths, inp.initial_sha256, inp.gt_sha256,
                    inp.first_frame_s, inp.last_frame_s, inp.intervals])


def evaluation_fingerprint(case_fp: str, cand: dict, home: Path | None = None) -> str:
    """An evaluation's inputs: its case's fingerprint and its candidate (content digest, where it
    is, its modality, steps and problems). Paths count as stored (relative to `home` when inside
    it), so the same inputs in two homes have the same fingerprint."""
    def where(path: str | None) -> str | None:
        return stored_path(path, home) if home is not None else path

    return _digest([case_fp, {
        **{k: cand.get(k) for k in ("system", "modality", "fingerprint", "ok", "problem",
                                    "step_ids")},
        "path": where(cand.get("path")),
        "step_paths": [where(p) for p in cand.get("step_paths") or []]}])


def _write_jpeg(path, rgb: np.ndarray, quality: int) -> str:
    from dagster_project.media.jpeg import encode_jpeg
    from dagster_project.tables import atomic_write_bytes

    atomic_write_bytes(path, encode_jpeg(rgb, quality=quality))
    return str(path)


def build_case_evidence(inp: CaseInputs, out_dir, quality: int = 90,
                        previous: dict[str, dict] | None = None,
                        home: Path | None = None) -> dict[str, list[dict]]:
    """Extract and write one case's evidence under `out_dir`; returns the table rows
    {"frames": [...], "storyboards": [...], "evaluations": [...], "rejects": [...]} and
    "extracted", the evaluation ids decoded now.

    `previous` (evaluation_id → its earlier "evaluation" row, "frames" and "storyboards") lets
    an evaluation whose `inputs_fingerprint` is unchanged and whose images are all still there
    keep its rows without decoding anything; S0 and the GT anchors are only decoded when some
    evaluation needs them and none is kept (a kept one holds them, their images written by the
    same case inputs). `home`: the warehouse the paths are stored relative to."""
    from dagster_project.media.extract import extract_frames
    from dagster_project.media.packet_index import VideoError, index_video

    out = Path(out_dir)
    frames: list[dict] = []
    boards: list[dict] = []
    evaluations: list[dict] = []
    rejects: list[dict] = []

    def shared_rows() -> list[dict]:
        """Case-level evidence, shared by every evaluation of the case."""
        with Image.open(inp.initial_png) as im:
            s0 = np.asarray(im.convert("RGB"))
        s0_size = fit_size(s0.shape[1], s0.shape[0])
        if s0_size != (s0.shape[1], s0.shape[0]):
            s0 = np.asarray(Image.fromarray(s0).resize(s0_size, Image.Resampling.BICUBIC))
        s0_path = _write_jpeg(out / "S0.jpg", s0, quality)
        shared: list[dict] = [{
            "role": "S0", "ordinal": 0, "suffix": "S0", "source_path": inp.initial_png,
            "source_fingerprint": inp.initial_sha256, "requested_s": None, "used_s": None,
            "pts": None, "frame_index": None, "clamped": False, "image_path": s0_path,
            "width": s0_size[0], "height": s0_size[1], "interval_ordinal": None, "label": None,
            "step_id": None,
        }]
        anchors = anchor_intervals(inp.intervals)
        if anchors:
            gt_index = index_video(inp.gt_mp4)
            size = fit_size(gt_index.width, gt_index.height)
            got = extract_frames(inp.gt_mp4, times=[a.requested_s for a in anchors], size=size,
                                 index=gt_index)
            for n, (a, f) in enumerate(zip(anchors, got, strict=True), start=1):
                shared.append({
                    "role": "anchor", "ordinal": n, "suffix": f"A{n}", "source_path": inp.gt_mp4,
                    "source_fingerprint": inp.gt_sha256, "requested_s": a.requested_s,
                    "used_s": f.used_s, "pts": f.pts, "frame_index": f.frame_index,
                    "clamped": f.clamped,
                    "image_path": _write_jpeg(out / "gt" / f"A{n}.jpg", f.rgb, quality),
                    "width": f.width, "height": f.height, "interval_ordinal": a.ordinal,
                    "label": f"{a.position}: {a.label}", "step_id": None,
                })
        return shared

    case_fp = case_fingerprint(inp, home)
    previous = previous or {}
    extracted: list[str] = []
    fingerprints = {cand["system"]: evaluation_fingerprint(case_fp, cand, home)
                    for cand in inp.candidates}
    kept = {system: old for system in fingerprints
            if (old := previous.get(f"{system}/{inp.case_id}")) is not None
            and old["evaluation"]["inputs_fingerprint"] == fingerprints[system]
            and all(Path(r["image_path"]).is_file() for r in old["frames"] + old["storyboards"])}
    # an evaluation kept holds the case's rows as its inputs (the case's among them) make them
    shared = next((_shared_of(old["frames"]) for old in kept.values()), None)
    for cand in inp.candidates:
        system = cand["system"]
        evaluation_id = f"{system}/{inp.case_id}"
        fingerprint = fingerprints[system]
        old = kept.get(system)
        if old is not None:
            evaluations.append(old["evaluation"])
            frames.extend(old["frames"])
            boards.extend(old["storyboards"])
            if old["evaluation"]["problem"] and cand["modality"] == "video" \
                    and cand.get("ok", True):  # the decode failure, as when it was extracted
                rejects.append({"source_file": cand["path"], "case_id": inp.case_id,
                                "stage": "rvp_evidence", "reason": old["evaluation"]["problem"]})
            continue
        extracted.append(evaluation_id)
        if shared is None:
            shared = shared_rows()
        ev = {"evaluation_id": evaluation_id, "system": system, "case_id": inp.case_id,
              "modality": cand["modality"], "candidate_path": cand["path"],
              "candidate_fingerprint": cand["fingerprint"], "clip_start_s": None,
              "clip_end_s": None, "n_panels": 0, "truncated": False, "steps_total": None,
              "steps_shown": None, "evidence_gaps": None, "extra_evidence": 0,
              "problem": None, "inputs_fingerprint": fingerprint}
        rows = [dict(r) for r in shared]
        sys_dir = out / system
        if not cand.get("ok", True):
            ev["problem"] = cand.get("problem") or "candidate unusable"
        elif cand["modality"] == "video":
            try:
                index = index_video(cand["path"])
                picks = panel_indices(index.frame_count)
                size = fit_size(index.width, index.height)
                got = extract_frames(cand["path"], indices=picks, size=size, index=index)
                # The clip actually covered: the decodable range the panels span.
                ev.update(clip_start_s=got[0].used_s, clip_end_s=got[-1].used_s)
            except VideoError as exc:
                ev["problem"] = str(exc)
                rejects.append({"source_file": cand["path"], "case_id": inp.case_id,
                                "stage": "rvp_evidence", "reason": str(exc)})
                got = []
            ev.update(n_panels=len(got), truncated=0 < len(got) < N_PANELS)
            for n, f in enumerate(got, start=1):
                rows.append({
                    "role": "panel", "ordinal": n, "suffix": f"P{n:02d}",
                    "source_path": cand["path"], "source_fingerprint": cand["fingerprint"],
                    "requested_s": None, "used_s": f.used_s, "pts": f.pts,
                    "frame_index": f.frame_index, "clamped": f.clamped,
                    "image_path": _write_jpeg(sys_dir / f"P{n:02d}.jpg", f.rgb, quality),
                    "width": f.width, "height": f.height, "interval_ordinal": None,
                    "label": None, "step_id": None,
                    "_rgb": f.rgb,
                })
            panels = [r for r in rows if r["role"] == "panel"]
            for b in range(math.ceil(len(panels) / PANELS_PER_STORYBOARD)):
                chunk = panels[b * PANELS_PER_STORYBOARD:(b + 1) * PANELS_PER_STORYBOARD]
                sheet = storyboard([(r["_rgb"], f"{r['suffix']}  {r['used_s']:.2f} s")
                                    for r in chunk], (chunk[0]["width"], chunk[0]["height"]))
                path = _write_jpeg(sys_dir / f"storyboard_{b + 1}.jpg", np.asarray(sheet),
                                   quality)
                boards.append({"evaluation_id": evaluation_id, "system": system,
                               "case_id": inp.case_id, "storyboard_no": b + 1,
                               "image_path": path, "panel_count": len(chunk),
                               "first_panel": chunk[0]["ordinal"],
                               "last_panel": chunk[-1]["ordinal"],
                               "width": sheet.width, "height": sheet.height})
        else:  # ordered step images: ids kept, no timestamps invented, transitions are gaps
            step_ids = list(cand.get("step_ids") or [])
            paths = dict(zip(step_ids, cand.get("step_paths") or [], strict=False))
            shown, cut = select_steps(step_ids)
            ev.update(steps_total=len(step_ids), steps_shown=len(shown), truncated=cut,
                      evidence_gaps=[f"{a}->{b}" for a, b in zip(["S0", *shown], shown,
                                                                  strict=False)])
            for n, step in enumerate(shown, start=1):
                with Image.open(paths[step]) as im:
                    rgb = np.asarray(im.convert("RGB"))
                size = fit_size(rgb.shape[1], rgb.shape[0])
                if size != (rgb.shape[1], rgb.shape[0]):
                    rgb = np.asarray(Image.fromarray(rgb).resize(size, Image.Resampling.BICUBIC))
                rows.append({
                    "role": "step", "ordinal": n, "suffix": f"step-{step}",
                    "source_path": paths[step],
                    "source_fingerprint": hashlib.sha256(Path(paths[step]).read_bytes())
                    .hexdigest(),
                    "requested_s": None, "used_s": None, "pts": None, "frame_index": None,
                    "clamped": False,
                    "image_path": _write_jpeg(sys_dir / f"step-{step}.jpg", rgb, quality),
                    "width": size[0], "height": size[1], "interval_ordinal": None,
                    "label": None, "step_id": step,
                })
        ev["n_source_frames"] = len(rows)
        evaluations.append(ev)
        for r in rows:
            r.pop("_rgb", None)
            frames.append({"evidence_id": f"{evaluation_id}#{r.pop('suffix')}",
                           "evaluation_id": evaluation_id, "system": system,
                           "case_id": inp.case_id, **r})
    return {"frames": frames, "storyboards": boards, "evaluations": evaluations,
            "rejects": rejects, "extracted": extracted}


def _shared_of(frames: list[dict]) -> list[dict]:
    """The case-level rows (S0, the GT anchors) of an evaluation's frame rows, as
    `build_case_evidence` makes them before they are an evaluation's."""
    return [{**{k: v for k, v in r.items()
                if k not in ("evidence_id", "evaluation_id", "system", "case_id")},
             "suffix": r["evidence_id"][len(r["evaluation_id"]) + 1:]}
            for r in frames if r["role"] in ("S0", "anchor")]


# raw_rvp_evidence_frames, raw_rvp_storyboards, raw_rvp_evaluations: per case partition
FRAMES_SCHEMA = raw_schema("rvp_evidence_frames")
STORYBOARDS_SCHEMA = raw_schema("rvp_storyboards")
EVALUATIONS_SCHEMA = raw_schema("rvp_evaluations")
EVIDENCE_TABLES = {"rvp_evidence_frames": FRAMES_SCHEMA, "rvp_storyboards": STORYBOARDS_SCHEMA,
                   "rvp_evaluations": EVALUATIONS_SCHEMA}
