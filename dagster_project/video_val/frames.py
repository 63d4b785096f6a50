"""The frames of the frame plan, decoded and resized as planned (raw_vv_frames), one part per
planned video (`parts.PartStore`).

A part is keyed by the video (its data_source, stored path and content digest, the digest
remembered per file identity in the file cache), its plan (frame indices, size, patch size) and
`FRAMES_VERSION`, and its images live in `frames/vv/<key>/`: a video whose part and images are
there is never decoded again, a changed video or plan is decoded into a new part, and the parts
and images of plans no longer wanted are removed.

Resizing is libswscale bicubic (`frame.reformat`), which is close to but not bit-identical
with torchvision's antialiased bicubic used inside qwen-vl-utils.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from dagster_project.dropfolder import file_sha256
from dagster_project.filecache import DIGEST_KIND, DIGEST_VERSION, remembered
from dagster_project.parts import PartStore, fan_out
from dagster_project.tables import (
    atomic_write_bytes,
    connect_raw,
    raw_schema,
    remove_stale_temps,
    resolved_path,
    rows_to_table,
    stored_path,
)

# Bump when decoding, resizing or encoding of the frames changes: every video is decoded again.
FRAMES_VERSION = "1"

# raw_vv_frames: one row per decoded frame, one part per planned video
VV_FRAMES_SCHEMA = raw_schema("vv_frames")


def frames_store(home: Path) -> PartStore:
    return PartStore.of_table(home, "vv_frames", FRAMES_VERSION, VV_FRAMES_SCHEMA)


def images_root(home: Path) -> Path:
    return home / "frames" / "vv"


@dataclass(frozen=True)
class PlannedVideo:
    data_source: str
    video_path: str  # absolute
    frame_indices: list[int]
    width: int
    height: int
    patch_size: int


def planned_videos(home: Path) -> list[PlannedVideo]:
    """Every planned video (plan without error) with the data_source of its questions."""
    con = connect_raw(home, ["vv_frame_plan", "vv_questions"])
    rows = con.execute("""
        SELECT DISTINCT q.data_source, p.video_path, p.frame_indices, p.resized_width,
               p.resized_height, p.patch_size
        FROM raw.vv_frame_plan p JOIN raw.vv_questions q
          ON q.video_path = p.video_path AND q.fps IS NOT DISTINCT FROM p.fps
         AND q.max_frames IS NOT DISTINCT FROM p.max_frames
         AND q.min_pixels IS NOT DISTINCT FROM p.min_pixels
         AND q.max_pixels IS NOT DISTINCT FROM p.max_pixels
        WHERE p.error IS NULL
        ORDER BY 1, 2, 4, 5""").fetchall()
    con.close()
    return [PlannedVideo(s, p, list(idx), w, h, patch) for s, p, idx, w, h, patch in rows]


def extract_video(job: tuple[PlannedVideo, str, str]) -> int:
    """Decode one planned video into its images and its part (in a worker); the rows."""
    from dagster_project.media.extract import extract_frames
    from dagster_project.media.jpeg import encode_jpeg
    from dagster_project.media.packet_index import VideoError

    video, key, home_text = job
    home = Path(home_text)
    folder = images_root(home) / key
    remove_stale_temps(folder)  # a killed run's (one job per video)
    base = {"data_source": video.data_source, "video_path": video.video_path,
            "patch_size": video.patch_size}
    try:
        frames = extract_frames(video.video_path, indices=video.frame_indices,
                                size=(video.width, video.height))
        rows = []
        for n, f in enumerate(frames):
            path = folder / f"{n:03d}_{f.frame_index:06d}.jpg"
            atomic_write_bytes(path, encode_jpeg(f.rgb, quality=90))
            rows.append({**base, "frame_no": n, "frame_index": f.frame_index, "pts": f.pts,
                         "used_s": f.used_s, "width": f.width, "height": f.height,
                         "image_path": str(path)})
    except VideoError as exc:
        rows = [{**base, "error": str(exc)}]
    frames_store(home).write(key, rows_to_table(rows, VV_FRAMES_SCHEMA), home=home)
    return len(rows)


@dataclass
class FramesResult:
    videos: int = 0
    decoded: list[str] = field(default_factory=list)  # the parts written now
    removed: list[str] = field(default_factory=list)


def _digest(path: str, file_cache: Path | None) -> str | None:
    try:
        return remembered(Path(path), file_cache, DIGEST_KIND, DIGEST_VERSION, file_sha256)
    except OSError:
        return None  # gone since it was probed: the decode says so, in the part


def _unchanged(store: PartStore, key: str, home: Path) -> bool:
    if not store.has(key):
        return False
    images = pq.ParquetFile(store.path(key)).read(columns=["image_path"]).column(0).to_pylist()
    return all(os.path.isfile(resolved_path(p, home) or "") for p in images if p is not None)


def sync_frames(home: Path, file_cache: Path | None,
                log: Callable[[str], None] = lambda _: None, workers: int = 2,
                ray_address: str = "") -> FramesResult:
    """Bring `raw_vv_frames` in line with the frame plan (see the module notes); the videos to
    decode fanned out over `workers` processes, or as tasks of the Ray cluster at
    `ray_address` (`parts.fan_out`)."""
    store = frames_store(home)
    store.ensure_schema()
    videos = planned_videos(home)
    with ThreadPoolExecutor(max_workers=2) as pool:  # hashing releases the GIL
        digests = list(pool.map(lambda v: _digest(v.video_path, file_cache), videos))
    keys = [store.key(f"{v.data_source}.{Path(v.video_path).stem}", v.data_source,
                      stored_path(v.video_path, home), sha, v.frame_indices, v.width, v.height,
                      v.patch_size) for v, sha in zip(videos, digests, strict=True)]
    jobs = [(v, key, str(home)) for v, key in zip(videos, keys, strict=True)
            if not _unchanged(store, key, home)]
    result = FramesResult(videos=len(videos), decoded=[job[1] for job in jobs])
    for done, _ in enumerate(fan_out(extract_video, jobs, workers, ray_address, log), 1):
        if done % 50 == 0 or done == len(jobs):
            log(f"val frames: {done}/{len(jobs)} videos decoded")
    result.removed = store.keep(keys)
    wanted = set(keys)
    root = images_root(home)
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.name in wanted:
            continue
        if folder.is_dir():  # the images of a part removed (or of an older layout)
            shutil.rmtree(folder)
        else:
            folder.unlink()
    log(f"val frames: {len(videos) - len(jobs)} videos unchanged, {len(jobs)} decoded, "
        f"{len(result.removed)} parts removed")
    return result
