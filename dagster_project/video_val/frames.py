"""The frames of the frame plan, decoded and resized as planned (raw_vv_frames).

Resizing is libswscale bicubic (`frame.reformat`), which is close to but not bit-identical
with torchvision's antialiased bicubic used inside qwen-vl-utils.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from dagster_project.tables import atomic_write_bytes, raw_schema

# raw_vv_frames: one row per decoded frame, one part per data_source
VV_FRAMES_SCHEMA = raw_schema("vv_frames")


def extract_video(job: tuple[str, str, str, list[int], int, int, int, str]) -> list[dict]:
    from dagster_project.media.extract import extract_frames
    from dagster_project.media.jpeg import encode_jpeg
    from dagster_project.media.packet_index import VideoError

    data_source, video_path, stored, indices, width, height, patch, out_dir = job
    # named after the stored path, so the same inputs give the same files in any home
    folder = Path(out_dir) / hashlib.sha1(stored.encode()).hexdigest()[:16]
    base = {"data_source": data_source, "video_path": video_path, "patch_size": patch}
    try:
        frames = extract_frames(video_path, indices=indices, size=(width, height))
    except VideoError as exc:
        return [{**base, "error": str(exc)}]
    rows = []
    for n, f in enumerate(frames):
        path = folder / f"{n:03d}_{f.frame_index:06d}.jpg"
        atomic_write_bytes(path, encode_jpeg(f.rgb, quality=90))
        rows.append({**base, "frame_no": n, "frame_index": f.frame_index, "pts": f.pts,
                     "used_s": f.used_s, "width": f.width, "height": f.height,
                     "image_path": str(path)})
    return rows
