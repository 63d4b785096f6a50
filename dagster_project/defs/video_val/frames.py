"""`vv_frames`: the frames of the frame plan, decoded and resized as planned, per data_source.

Partitioned by data_source (a static set); each partition writes `tables/vv_frames/<source>.parquet`
and its JPEGs under `frames/vv/<source>/`, so partitions run in parallel without sharing files.
Resizing is libswscale bicubic (`frame.reformat`), which is close to but not bit-identical with
torchvision's antialiased bicubic used inside qwen-vl-utils.
"""

import hashlib
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import dagster as dg
import pyarrow as pa
from tqdm import tqdm

from dagster_project.catalog import connect
from dagster_project.partitions import VV_SOURCE_PARTITIONS
from dagster_project.resources import BenchlakeSettings, record_written
from dagster_project.tables import atomic_write_bytes, path_field, rows_to_table, write_table

VV_FRAMES_SCHEMA = pa.schema([
    ("data_source", pa.string()), path_field("video_path"), ("patch_size", pa.int32()),
    ("frame_no", pa.int32()), ("frame_index", pa.int64()), ("pts", pa.int64()),
    ("used_s", pa.float64()), ("width", pa.int32()), ("height", pa.int32()),
    path_field("image_path"), ("error", pa.string()),
])


def _extract_video(job: tuple[str, str, str, list[int], int, int, int, str]) -> list[dict]:
    from dagster_project.media.extract import VideoError, encode_jpeg, extract_frames

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


@dg.asset(group_name="video_val", kinds={"parquet"}, deps=["vv_frame_plan", "vv_questions"],
          partitions_def=VV_SOURCE_PARTITIONS, backfill_policy=dg.BackfillPolicy.single_run())
def vv_frames(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The planned frames of every planned video of a data_source, at the planned size."""
    s = benchlake.settings()
    con, _ = connect(s.tables_dir)
    total = 0
    for source in context.partition_keys:
        plans = con.execute("""
            SELECT DISTINCT p.video_path, p.video_abspath, p.frame_indices, p.resized_width,
                   p.resized_height, p.patch_size
            FROM vv_frame_plan p JOIN vv_questions q
              ON q.video_path = p.video_path AND q.fps IS NOT DISTINCT FROM p.fps
             AND q.max_frames IS NOT DISTINCT FROM p.max_frames
             AND q.min_pixels IS NOT DISTINCT FROM p.min_pixels
             AND q.max_pixels IS NOT DISTINCT FROM p.max_pixels
            WHERE q.data_source = ? AND p.error IS NULL
            ORDER BY 1, 4, 5""", [source]).fetchall()
        out_dir = str(s.frames_dir / "vv" / source)
        jobs = [(source, path, stored, list(idx), w, h, patch, out_dir)
                for stored, path, idx, w, h, patch in plans]
        rows: list[dict] = []
        with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool, tqdm(
                total=len(jobs), desc=f"val frames {source}", unit="video", disable=None) as bar:
            for video_rows in pool.map(_extract_video, jobs):
                rows.extend(video_rows)
                bar.update(1)
        write_table(rows_to_table(rows, VV_FRAMES_SCHEMA),
                    s.tables_dir / "vv_frames" / f"{source}.parquet", home=s.home)
        record_written(benchlake, "vv_frames", source, len(rows), context.run.run_id)
        context.log.info(f"{source}: {len(rows)} frames from {len(jobs)} videos")
        total += len(rows)
    return dg.MaterializeResult(metadata={"dagster/row_count": total,
                                          "path": dg.MetadataValue.path(
                                              str(s.tables_dir / "vv_frames"))})


TABLE_KEYS = [dg.AssetKey("vv_frames")]
