"""The embedded Rynn-VP candidates demo (`CANDIDATES_DIR` layout), generated deterministically.

Three invented systems over the demo cases, chosen to exercise both evaluation protocols and the
edge cases downstream assets must handle:

- `veo-sim`: a video for every case (256x144, 24 fps, 8-12 s); one clip is only 20 frames long,
  shorter than the 30 dense panels of the standard video policy, so truncation must be recorded.
- `storyboard-planner`: ordered step images for every case (`steps/01.png`, ...; 4-9 steps,
  320x180); one case skips a step id (01, 02, 04, ...), an evidence gap rather than a rename.
- `wan-sim`: videos (320x180, 24 fps, 8-10 s) for only about two thirds of the cases, so the
  scored denominator differs from the case count.

Content comes from `synthetic_frames` with a seed derived from (system, case_id), so every
candidate differs and the same call always writes the same bytes. The root holds nothing but
`<system>/` folders: any other file would be an input the scanner has to reject.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from io import BytesIO
from itertools import islice
from pathlib import Path

from PIL import Image

from benchlake_demo.rynn_vp import load_spec
from dagster_project.lifeline import process_pool
from dagster_project.media.encode import synthetic_frames, write_h264
from dagster_project.tables import atomic_write_bytes

FPS = 24
GOP = 48  # one keyframe every 2 s, like a typical generator's output
# x264 "superfast" encodes ~35% faster than the GT demo's "veryfast" for somewhat larger files
# (~3 MB in all); generation time matters more here, since the demo is built on first use.
PRESET = "superfast"
SHORT_FRAMES = 20  # < 30: fewer frames than the dense-panel budget of the video policy
STEP_STRIDE = 12  # frames between consecutive step images: visible motion from step to step

VEO, STORYBOARD, WAN = "veo-sim", "storyboard-planner", "wan-sim"
SYSTEMS = (VEO, STORYBOARD, WAN)


@dataclass(frozen=True)
class DemoCandidate:
    """One planned candidate: a video (`n_frames`) or ordered step images (`step_ids`)."""

    system: str
    case_id: str
    modality: str  # "video" | "images"
    width: int
    height: int
    seed: int
    n_frames: int = 0
    step_ids: tuple[str, ...] = ()

    @property
    def rel_dir(self) -> str:
        return f"{self.system}/{self.case_id}"


def candidate_seed(system: str, case_id: str) -> int:
    """A stable 32-bit seed per (system, case): SHA-256, not `hash`, which varies per process."""
    return int.from_bytes(hashlib.sha256(f"{system}/{case_id}".encode()).digest()[:4], "big")


def demo_plan() -> list[DemoCandidate]:
    """Every candidate the demo writes, sorted by (system, case_id)."""
    case_ids = [str(c["case_id"]) for c in load_spec()["cases"]]
    # Fixed positions in the spec's case list (not seeds) pick the special cases, so the
    # quirks stay put if seeds change: the short clip, the gapped storyboard, wan's holes.
    short_case = case_ids[2]
    gap_case = case_ids[1]
    wan_missing = {cid for i, cid in enumerate(case_ids) if i % 3 == 2}
    plan: list[DemoCandidate] = []
    for cid in case_ids:
        seed = candidate_seed(VEO, cid)
        n_frames = SHORT_FRAMES if cid == short_case else FPS * (8 + seed % 5)
        plan.append(DemoCandidate(VEO, cid, "video", 256, 144, seed, n_frames=n_frames))

        seed = candidate_seed(STORYBOARD, cid)
        n_steps = 4 + seed % 6
        numbers = list(range(1, n_steps + 1))
        if cid == gap_case:
            numbers = [n if n < 3 else n + 1 for n in numbers]  # 01, 02, 04, 05, ...
        step_ids = tuple(f"{n:02d}" for n in numbers)
        plan.append(DemoCandidate(STORYBOARD, cid, "images", 320, 180, seed, step_ids=step_ids))

        if cid not in wan_missing:
            seed = candidate_seed(WAN, cid)
            plan.append(DemoCandidate(WAN, cid, "video", 320, 180, seed,
                                      n_frames=FPS * (8 + seed % 3)))
    return sorted(plan, key=lambda c: (c.system, c.case_id))


def _write_video(path: Path, cand: DemoCandidate) -> None:
    frames = synthetic_frames(cand.n_frames, cand.width, cand.height, seed=cand.seed,
                              label=cand.system)
    write_h264(path, frames, fps=FPS, gop=GOP, preset=PRESET)


def _write_steps(steps_dir: Path, cand: DemoCandidate) -> None:
    # Step k shows frame k*STEP_STRIDE of one synthetic clip: a coherent scene that moves on.
    n_frames = len(cand.step_ids) * STEP_STRIDE
    frames = synthetic_frames(n_frames, cand.width, cand.height, seed=cand.seed,
                              label=cand.system)
    for step_id, frame in zip(cand.step_ids, islice(frames, 0, None, STEP_STRIDE), strict=True):
        buf = BytesIO()
        Image.fromarray(frame).save(buf, format="PNG")  # no timestamps: same bytes every run
        atomic_write_bytes(steps_dir / f"{step_id}.png", buf.getvalue())


def build_candidates_demo(dest: Path) -> Path:
    """Write the demo candidates into `dest` (created; must not exist yet) and return it."""
    dest = Path(dest)
    dest.mkdir(parents=True)
    plan = demo_plan()
    videos = [c for c in plan if c.modality == "video"]
    # Encoding dominates; candidates are independent, so use both cores (output is identical).
    # Longest first so the two workers finish together.
    videos.sort(key=lambda c: -c.n_frames * c.width * c.height)
    with process_pool(min(2, os.cpu_count() or 1)) as pool:
        jobs = [pool.submit(_write_video, dest / c.rel_dir / "candidate.mp4", c) for c in videos]
        # Step images are cheap: write them here while the workers encode.
        for cand in plan:
            if cand.modality == "images":
                _write_steps(dest / cand.rel_dir / "steps", cand)
        for job in jobs:
            job.result()
    return dest
