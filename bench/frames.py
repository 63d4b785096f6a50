"""Frame extraction cost: full decode vs decord vs `extract_frames` vs the dependency lower bound.

    python bench/frames.py [--reps 3] [--cache DIR]

Generates (once, cached in a temp dir) 1920x1080 30 fps H.264 videos with x264 B-frames: 44 s
at GOP 60 and at GOP 250 for timing, 20 s and 120 s at GOP 60 for the memory check. Target
sets: Rynn-VP (4 anchor times at 1/4, 1/2, 3/4 and the end, plus 30 panels at
round(linspace(0, n-1, 30))) and Qwen (44 frames at 1 fps). Each method runs in its own
subprocess; CPU seconds (time.process_time) and wall seconds are medians of --reps runs:

  full    plain sequential decode, one thread, targets converted to RGB
  decord  VideoReader(num_threads=1).get_batch(indices), from a separate venv (see below)
  ours    index_video + extract_frames
  lower   the packets the targets depend on (per target: its GOP's keyframe and every
          reference picture up to it, plus itself) fed to a fresh one-thread decoder, targets
          converted to RGB; packets are read beforehand and not timed

decord is installed with pip into its own venv (default /tmp/decordvenv, numpy<2) so the
project venv stays untouched; if that fails the bench says why and goes on without it.
Outputs of full, ours and lower are compared by hash (they must be bit-identical) and every
returned frame's barcode is checked against its frame index. Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

W, H, FPS = 1920, 1080, 30
VIDEOS = {  # name: (seconds, gop, crf, preset)
    "gop60": (44, 60, 28, "veryfast"),
    "gop250": (44, 250, 28, "veryfast"),
    "mem20": (20, 60, 32, "superfast"),
    "mem120": (120, 60, 32, "superfast"),
}
BFRAMES = 3
DECORD_VENV = Path("/tmp/decordvenv")
TARGETS = {"full/ours": 1.8, "decord/ours": 1.5, "ours/lower": 1.25, "rss_mb": 400.0}


# ------------------------------------------------------------------------------------------
# video generation
# ------------------------------------------------------------------------------------------


def _generate(args: tuple[str, Path]) -> str:
    from dagster_project.media.encode import synthetic_frames, write_h264

    name, path = args
    seconds, gop, crf, preset = VIDEOS[name]
    frames = synthetic_frames(seconds * FPS, W, H, seed=7, label=name)
    write_h264(path, frames, fps=FPS, gop=gop, bframes=BFRAMES, crf=crf, preset=preset)
    return name


def ensure_videos(cache: Path) -> dict[str, Path]:
    paths = {name: cache / f"{name}_{W}x{H}_{FPS}fps.mp4" for name in VIDEOS}
    todo = [(name, path) for name, path in paths.items() if not path.exists()]
    if todo:
        print(f"generating {len(todo)} video(s) in {cache} (a few minutes, cached) ...")
        start = time.perf_counter()
        with ProcessPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 1)) as pool:
            for name in pool.map(_generate, todo):
                print(f"  {name} done ({time.perf_counter() - start:.0f} s)")
    return paths


# ------------------------------------------------------------------------------------------
# target sets
# ------------------------------------------------------------------------------------------


def target_sets(path: Path) -> dict[str, dict[str, list]]:
    """{set: {"times": [...], "indices": [...], "frames": resolved frame indices}}."""
    from dagster_project.media.packet_index import index_video

    index = index_video(path)
    n = index.frame_count
    start, last = index.time_of(0), index.time_of(n - 1)
    step = float(1 / (index.pts[1] - index.pts[0]) / index.time_base) if n > 1 else 1.0
    end = last + 1.0 / step  # the nominal end of the video: shows (clamps to) the last frame
    duration = end - start
    anchors = [start + duration * f for f in (0.25, 0.5, 0.75)] + [end]
    panels = [int(round(x)) for x in np.linspace(0, n - 1, 30)]
    qwen = [start + k for k in range(int(duration))]  # 1 fps
    sets = {
        "Rynn-VP": {"times": anchors, "indices": panels},
        "Qwen": {"times": qwen, "indices": []},
    }
    for spec in sets.values():
        spec["frames"] = [index.frame_at_time(t)[0] for t in spec["times"]] + spec["indices"]
    return sets


# ------------------------------------------------------------------------------------------
# workers (run in fresh subprocesses)
# ------------------------------------------------------------------------------------------


def _digest(arrays: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _measure(fn, reps: int) -> dict:
    cpu, wall, out = [], [], None
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return {"cpu": cpu, "wall": wall, "out": out}


def _barcodes_ok(arrays: list[np.ndarray], frames: list[int]) -> bool:
    from dagster_project.media.encode import read_frame_index

    return all(read_frame_index(a) == f % 65536 for a, f in zip(arrays, frames, strict=True))


def work_ours(path: str, spec: dict, reps: int) -> dict:
    from dagster_project.media.extract import ExtractStats, extract_frames
    from dagster_project.media.packet_index import index_video

    stats = ExtractStats()

    def run() -> list[np.ndarray]:
        index = index_video(path)
        res = extract_frames(
            path, times=spec["times"], indices=spec["indices"], index=index, stats=stats
        )
        return [r.rgb for r in res]

    m = _measure(run, reps)
    arrays = m.pop("out")
    m["digest"] = _digest(arrays)
    m["barcodes_ok"] = _barcodes_ok(arrays, spec["frames"])
    m["stats"] = {k: v // reps for k, v in vars(stats).items()}
    return m


def work_full(path: str, spec: dict, reps: int) -> dict:
    import av

    from dagster_project.media.packet_index import index_video

    index = index_video(path)
    wanted = {index.pts[f] for f in spec["frames"]}

    def run() -> dict[int, np.ndarray]:
        got: dict[int, np.ndarray] = {}
        with av.open(path) as container:
            stream = container.streams.video[0]
            stream.codec_context.thread_type = "NONE"
            stream.codec_context.thread_count = 1
            for frame in container.decode(stream):
                if frame.pts in wanted:
                    got[frame.pts] = frame.to_ndarray(format="rgb24")
        return got

    m = _measure(run, reps)
    got = m.pop("out")
    arrays = [got[index.pts[f]] for f in spec["frames"]]
    m["digest"] = _digest(arrays)
    m["barcodes_ok"] = _barcodes_ok(arrays, spec["frames"])
    return m


def lower_bound_packets(index, frames: list[int]) -> list[int]:
    """Packet positions the targets depend on, from the index's GOP and reference flags."""
    needed: set[int] = set()
    for f in frames:
        pos = index.frame_pkt[f]
        key = index.gop_starts[index.gop_of(pos)]
        needed.update(p for p in range(key, pos) if index.pkt_ref[p] is not False)
        needed.add(pos)
    return sorted(needed)


def work_lower(path: str, spec: dict, reps: int) -> dict:
    import av

    from dagster_project.media.packet_index import index_video

    index = index_video(path)
    positions = set(lower_bound_packets(index, spec["frames"]))
    wanted = {index.pts[f] for f in spec["frames"]}
    with av.open(path) as container:
        stream = container.streams.video[0]
        codec_name, extradata = stream.codec_context.name, stream.codec_context.extradata
        packets = [
            p for i, p in enumerate(p for p in container.demux(stream) if p.size) if i in positions
        ]

    def run() -> dict[int, np.ndarray]:
        ctx = av.CodecContext.create(codec_name, "r")
        ctx.extradata = extradata
        ctx.thread_type = "NONE"
        ctx.thread_count = 1
        got: dict[int, np.ndarray] = {}
        for packet in [*packets, None]:
            for frame in ctx.decode(packet):
                if frame.pts in wanted:
                    got[frame.pts] = frame.to_ndarray(format="rgb24")
        return got

    m = _measure(run, reps)
    got = m.pop("out")
    missing = wanted - set(got)
    arrays = [got[index.pts[f]] for f in spec["frames"] if index.pts[f] in got]
    m["digest"] = _digest(arrays) if not missing else f"missing {len(missing)}"
    m["barcodes_ok"] = not missing and _barcodes_ok(arrays, spec["frames"])
    m["packets"] = len(positions)
    return m


DECORD_WORKER = r"""
import json, sys, time, resource
import numpy as np
path, frames, reps = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
from decord import VideoReader, cpu
cpu_t, wall_t = [], []
for _ in range(reps):
    c0, w0 = time.process_time(), time.perf_counter()
    vr = VideoReader(path, ctx=cpu(0), num_threads=1)
    batch = vr.get_batch(frames).asnumpy()
    cpu_t.append(time.process_time() - c0); wall_t.append(time.perf_counter() - w0)
    del vr
np.save(sys.argv[4], batch)
print(json.dumps({"cpu": cpu_t, "wall": wall_t,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def ensure_decord() -> tuple[str | None, str]:
    """(python of a venv with decord, or None; a note on why not)."""
    py = DECORD_VENV / "bin" / "python"
    check = [str(py), "-c", "import decord; print(decord.__version__)"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return str(py), ""
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(DECORD_VENV)],
            check=True,
            capture_output=True,
            text=True,
        )
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "numpy<2", "decord"],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        subprocess.run(check, check=True, capture_output=True, text=True)
        return str(py), ""
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return None, f"decord not available: {detail.strip().splitlines()[-1:] or exc}"


def run_decord(py: str, path: str, spec: dict, reps: int) -> dict:
    from dagster_project.media.encode import read_frame_index

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "batch.npy"
        proc = subprocess.run(
            [py, "-c", DECORD_WORKER, path, json.dumps(spec["frames"]), str(reps), str(out)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1:]}
        m = json.loads(proc.stdout.strip().splitlines()[-1])
        batch = np.load(out)
    codes = [read_frame_index(a) for a in batch]
    m["barcodes_ok"] = codes == [f % 65536 for f in spec["frames"]]
    m["digest"] = _digest(list(batch))
    return m


WORKERS = {"ours": work_ours, "full": work_full, "lower": work_lower}


def run_worker(method: str, path: Path, spec: dict, reps: int) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", method, str(path), json.dumps(spec), str(reps)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{method} worker failed on {path.name}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def worker_main(method: str, path: str, spec_json: str, reps: int) -> None:
    spec = json.loads(spec_json)
    result = WORKERS[method](path, spec, reps)
    result["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


# ------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "benchlake-frames"
    )
    parser.add_argument(
        "--worker", nargs=4, metavar=("METHOD", "PATH", "SPEC", "REPS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.worker:
        method, path, spec, reps = args.worker
        worker_main(method, path, spec, int(reps))
        return 0

    paths = ensure_videos(args.cache)
    decord_py, decord_note = ensure_decord()
    if decord_note:
        print(decord_note)
    misses: list[str] = []
    med = statistics.median

    print(f"\nCPU s / wall s, median of {args.reps}; {W}x{H} {FPS} fps, x264 bframes={BFRAMES}")
    header = (
        f"{'video':<8}{'set':<9}{'n':>4}  {'full':>11}  {'decord':>11}  {'ours':>11}  "
        f"{'lower':>11}  {'full/ours':>9}  {'decord/ours':>11}  {'ours/lower':>10}  "
        f"{'sent/lower pkts':>15}"
    )
    print(header)
    print("-" * len(header))
    for video in ("gop60", "gop250"):
        path = paths[video]
        for set_name, spec in target_sets(path).items():
            res = {m: run_worker(m, path, spec, args.reps) for m in ("full", "ours", "lower")}
            if decord_py:
                res["decord"] = run_decord(decord_py, str(path), spec, args.reps)

            def cell(m: str, res: dict = res) -> str:
                r = res.get(m)
                if not r or "cpu" not in r:
                    return f"{'n/a':>11}"
                return f"{med(r['cpu']):5.2f}/{med(r['wall']):5.2f}"

            def ratio(a: str, b: str, res: dict = res) -> float | None:
                if "cpu" not in res.get(a, {}) or "cpu" not in res.get(b, {}):
                    return None
                return med(res[a]["cpu"]) / med(res[b]["cpu"])

            ratios = {
                "full/ours": ratio("full", "ours"),
                "decord/ours": ratio("decord", "ours"),
                "ours/lower": ratio("ours", "lower"),
            }
            fmt = {k: (f"{v:.2f}" if v is not None else "n/a") for k, v in ratios.items()}
            sent = res["ours"]["stats"]["packets_sent"]
            print(
                f"{video:<8}{set_name:<9}{len(spec['frames']):>4}  {cell('full')}  "
                f"{cell('decord')}  {cell('ours')}  {cell('lower')}  {fmt['full/ours']:>9}  "
                f"{fmt['decord/ours']:>11}  {fmt['ours/lower']:>10}  "
                f"{str(sent) + '/' + str(res['lower']['packets']):>15}"
            )
            # Correctness: full, ours and lower must return identical pixels and right frames.
            digests = {m: res[m]["digest"] for m in ("full", "ours", "lower")}
            if len(set(digests.values())) != 1:
                misses.append(f"{video}/{set_name}: pixels differ between methods {digests}")
            for m, r in res.items():
                if "barcodes_ok" in r and not r["barcodes_ok"]:
                    misses.append(f"{video}/{set_name}: {m} returned wrong frames (barcode)")
            if video == "gop60":
                for key in ("full/ours", "decord/ours"):
                    v = ratios[key]
                    if v is not None and v < TARGETS[key]:
                        misses.append(f"{video}/{set_name}: {key} = {v:.2f} < {TARGETS[key]}")
            v = ratios["ours/lower"]
            if v is not None and v > TARGETS["ours/lower"]:
                misses.append(f"{video}/{set_name}: ours/lower = {v:.2f} > {TARGETS['ours/lower']}")

    print("\npeak RSS of ours (fresh subprocess, Rynn-VP set, native 1080p RGB output):")
    rss = {}
    for video in ("mem20", "mem120"):
        path = paths[video]
        spec = target_sets(path)["Rynn-VP"]
        r = run_worker("ours", path, spec, 1)
        rss[video] = r["maxrss_mb"]
        print(
            f"  {video}: {VIDEOS[video][0]:>4} s  {r['maxrss_mb']:7.1f} MB  cpu {r['cpu'][0]:.2f} s"
        )
    for video, mb in rss.items():
        if mb > TARGETS["rss_mb"]:
            misses.append(f"{video}: peak RSS {mb:.0f} MB > {TARGETS['rss_mb']:.0f} MB")
    if rss["mem120"] > rss["mem20"] * 1.15:
        misses.append(f"peak RSS not flat: {rss['mem20']:.0f} MB -> {rss['mem120']:.0f} MB")

    print(
        f"\ntargets: full/ours >= {TARGETS['full/ours']} and decord/ours >= "
        f"{TARGETS['decord/ours']} at GOP 60 (CPU), ours/lower <= {TARGETS['ours/lower']}, "
        f"peak RSS <= {TARGETS['rss_mb']:.0f} MB and flat"
    )
    for miss in misses:
        print(f"MISSED: {miss}")
    if not misses:
        print("all targets met")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
