"""One probe per distinct val video (the probe of rvp_media), as raw_vv_videos rows."""

from __future__ import annotations

from pathlib import Path

from dagster_project.media.probe import probe_video_cached
from dagster_project.tables import raw_schema

# raw_vv_videos: one probe per distinct video
VIDEOS_SCHEMA = raw_schema("vv_videos")


def probe_row(video_path: str, n_rows: int, file_cache: Path | None = None) -> dict:
    """The probe of one video (remembered per file identity in `file_cache`)."""
    if not Path(video_path).is_file():
        return {"video_path": video_path, "n_rows": n_rows, "ok": False,
                "error": "video file is missing"}
    probe = probe_video_cached(video_path, file_cache)
    return {
        "video_path": video_path, "n_rows": n_rows, "ok": probe.ok, "error": probe.error,
        "codec": probe.codec, "width": probe.width, "height": probe.height, "fps": probe.fps,
        "duration_s": probe.metadata_duration_s, "frame_count": probe.frame_count,
        "first_frame_s": probe.first_frame_s, "last_frame_s": probe.last_frame_s,
        "first_frame_decodes": probe.first_frame_decodes,
        "last_frame_decodes": probe.last_frame_decodes, "size_bytes": probe.size_bytes,
    }
