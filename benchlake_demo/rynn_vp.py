"""The embedded Rynn-VP demo snapshot, generated deterministically from `assets/demo/`.

Same layout as the published release (`README.md`, `LICENSE`, `SHA256SUMS.txt`,
`cases/<case_id>/{task.json, gt_annotations.json, initial.png, gt.mp4}`), real H.264 videos with
moving content, and the card's annotation quirks reproduced on purpose (see `rynn_vp_cases.json`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from PIL import Image

from dagster_project.lifeline import process_pool
from dagster_project.media.encode import synthetic_frames, write_h264
from dagster_project.rynn_vp.checksums import hash_files
from dagster_project.settings import ASSETS_DIR
from dagster_project.tables import atomic_write_bytes

SPEC_PATH = ASSETS_DIR / "demo" / "rynn_vp_cases.json"

_README = """# Rynn-VP (benchlake embedded demo)

A small, generated stand-in for the Rynn-VP release in exactly its published layout:
`cases/<case_id>/{task.json, gt_annotations.json, initial.png, gt.mp4}` and `SHA256SUMS.txt`.
Videos are synthetic H.264 clips with moving shapes; texts and timestamps are invented but
reproduce the release's documented quirks. Not the dataset; for tests and demos only.
"""
_LICENSE = "Generated demo data for benchlake; the real release is CC BY-NC 4.0.\n"


def load_spec() -> dict[str, Any]:
    return json.loads(SPEC_PATH.read_text(encoding="utf-8"))


def _fmt(seconds: float) -> str:
    return f"{seconds:.1f}s"


def make_planning(case: dict[str, Any], spec: dict[str, Any] | None = None) -> dict[str, str]:
    """Deterministic intervals: n-1 actions over [0, D-0.5], then the terminal label. The times
    come from the case's seed; the labels are its instruction's own steps (`actions` in the
    spec), in order, each over one or more consecutive intervals (the real annotations repeat an
    action string across intervals too), so an interval never describes another task."""
    steps = (spec or load_spec())["actions"].get(case["instruction"], [])
    rng = random.Random(case["seed"])
    duration = float(case["seconds"])
    quirks = case.get("quirks", {})
    n_actions = int(case["intervals"]) - 1
    if not 0 < len(steps) <= n_actions:
        raise ValueError(f"demo case {case['case_id']}: {len(steps)} actions for its instruction, "
                         f"{n_actions} intervals to label")
    tail = 0.5
    weights = [rng.uniform(1.0, 3.0) for _ in range(n_actions)]
    total = sum(weights)
    # Boundaries on a 0.1 s grid, strictly increasing, the last one at D - tail.
    ticks = round((duration - tail) * 10)
    bounds = [0]
    acc = 0.0
    for i, w in enumerate(weights[:-1]):
        acc += w
        b = max(round(acc / total * ticks), bounds[-1] + 2)
        bounds.append(min(b, ticks - 2 * (n_actions - 1 - i)))
    bounds.append(ticks)
    planning: dict[str, str] = {}
    used: set[str] = set()
    for i in range(n_actions):
        start, end = bounds[i] / 10, bounds[i + 1] / 10
        if quirks.get("overlap_at") == i + 1:
            start = round(start - float(quirks["overlap_s"]), 1)
        label = steps[i * len(steps) // n_actions]
        key = f"{_fmt(start)}-{_fmt(end)}"
        assert key not in used, key
        used.add(key)
        planning[key] = label
    end = duration + float(quirks.get("end_excess_s", 0.0))
    planning[f"{_fmt(duration - tail)}-{_fmt(end)}"] = case["terminal"]
    return planning


def write_case(case_dir: Path, case: dict[str, Any], spec: dict[str, Any]) -> None:
    case_dir.mkdir(parents=True, exist_ok=True)
    fps, width, height = int(spec["fps"]), int(spec["width"]), int(spec["height"])
    n_frames = round(float(case["seconds"]) * fps)
    task: dict[str, Any] = {"task_id": case["case_id"], "instruction": case["instruction"]}
    if "plan" in case:
        task["plan"] = case["plan"]
    atomic_write_bytes(case_dir / "task.json",
                       (json.dumps(task, ensure_ascii=False, indent=2) + "\n").encode())
    ann = {
        "planning": make_planning(case, spec),
        "task": case["instruction"] + case.get("quirks", {}).get("task_trailing_whitespace", ""),
        "video": f"{hashlib.sha1(case['case_id'].encode()).hexdigest()[:12]}_rgb.mp4",
    }
    atomic_write_bytes(case_dir / "gt_annotations.json",
                       (json.dumps(ann, ensure_ascii=False, indent=2) + "\n").encode())
    frames = list(synthetic_frames(n_frames, width, height, seed=int(case["seed"])))
    Image.fromarray(frames[0]).save(case_dir / "initial.png", format="PNG")
    write_h264(case_dir / "gt.mp4", frames, fps=fps, gop=int(spec["gop"]))


def write_sha256sums(root: Path) -> None:
    rel_paths = sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*")
        if p.is_file() and p.name != "SHA256SUMS.txt"
    )
    digests = hash_files(root, rel_paths)
    lines = [f"{digests[rel]}  {rel}\n" for rel in rel_paths]
    atomic_write_bytes(root / "SHA256SUMS.txt", "".join(lines).encode())


def build_rynn_vp_demo(dest: Path) -> Path:
    """Write the demo snapshot into `dest` (created; must not exist yet)."""
    spec = load_spec()
    dest.mkdir(parents=True)
    atomic_write_bytes(dest / "README.md", _README.encode())
    atomic_write_bytes(dest / "LICENSE", _LICENSE.encode())
    # Encoding dominates; cases are independent, so use both cores (output is identical).
    with process_pool(min(2, os.cpu_count() or 1)) as pool:
        jobs = [pool.submit(write_case, dest / "cases" / c["case_id"], c, spec)
                for c in spec["cases"]]
        for job in jobs:
            job.result()
    write_sha256sums(dest)
    return dest
