"""Tests for deterministic synthetic video generation and H.264 encoding."""

from __future__ import annotations

import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from dagster_project.media.encode import (
    read_frame_index,
    synthetic_frames,
    write_demo_video,
    write_h264,
)

W, H, FPS, N, GOP = 320, 180, 25, 250, 25


@pytest.fixture(scope="module")
def demo_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("enc") / "demo.mp4"
    write_demo_video(path, width=W, height=H, fps=FPS, n_frames=N, gop=GOP, seed=7)
    return path


def _decode_rgb(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_synthetic_frames_shape_and_motion() -> None:
    frames = list(synthetic_frames(500, W, H, seed=1))
    assert len(frames) == 500
    assert all(f.shape == (H, W, 3) and f.dtype == np.uint8 for f in frames)
    assert all(not np.array_equal(a, b) for a, b in zip(frames, frames[1:], strict=False))


def test_synthetic_frames_deterministic_and_seed_label_dependent() -> None:
    a = list(synthetic_frames(5, 64, 48, seed=3))
    b = list(synthetic_frames(5, 64, 48, seed=3))
    c = list(synthetic_frames(5, 64, 48, seed=4))
    d = list(synthetic_frames(5, 64, 48, seed=3, label="other"))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert not np.array_equal(a[0], d[0])


def test_frame_index_barcode_roundtrip_on_raw_frames() -> None:
    frames = synthetic_frames(300, W, H, seed=2)
    assert [read_frame_index(f) for f in frames] == list(range(300))


def test_encoding_is_byte_identical(tmp_path: Path) -> None:
    paths = [tmp_path / "a" / "v.mp4", tmp_path / "b" / "v.mp4"]
    for p in paths:
        write_demo_video(p, width=W, height=H, fps=FPS, n_frames=60, gop=GOP, seed=11)
    data = [p.read_bytes() for p in paths]
    assert len(data[0]) > 1000
    assert data[0] == data[1]
    umask = os.umask(0)
    os.umask(umask)
    assert paths[0].stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_demo_video_decodes_to_expected_frames(demo_video: Path) -> None:
    frames = _decode_rgb(demo_video)
    assert len(frames) == N
    assert all(f.shape == (H, W, 3) for f in frames)
    assert all(not np.array_equal(a, b) for a, b in zip(frames, frames[1:], strict=False))
    # The barcode proves decoded display order matches generation order (no drops/dupes).
    assert [read_frame_index(f) for f in frames] == list(range(N))


def test_demo_video_stream_properties(demo_video: Path) -> None:
    with av.open(str(demo_video)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert stream.codec_context.pix_fmt == "yuv420p"
        assert (stream.width, stream.height) == (W, H)
        assert stream.average_rate == FPS
        assert "creation_time" not in container.metadata
        assert "encoder" not in container.metadata  # bitexact muxer: no "Lavf..." tag
        tb = stream.time_base
        assert tb is not None
        packets = [p for p in container.demux(stream) if p.pts is not None]
    # Keyframes exactly every GOP frames, in display order.
    by_pts = sorted(packets, key=lambda p: p.pts or 0)
    key_idx = [i for i, p in enumerate(by_pts) if p.is_keyframe]
    assert key_idx == list(range(0, N, GOP))
    # Constant frame rate: display timestamps are exactly i / fps.
    assert [(p.pts or 0) * tb for p in by_pts] == [Fraction(i, FPS) for i in range(N)]
    # B-frames are in use (decode order differs from display order).
    assert [p.pts for p in packets] != [p.pts for p in by_pts]


def test_no_bframes_gives_display_order_packets(tmp_path: Path) -> None:
    path = tmp_path / "nob.mp4"
    write_h264(path, synthetic_frames(30, 64, 48, seed=0), fps=10, gop=10, bframes=0)
    with av.open(str(path)) as container:
        pts = [p.pts for p in container.demux(video=0) if p.pts is not None]
    assert pts == sorted(pts) and len(pts) == 30


@pytest.mark.parametrize(("width", "height"), [(854, 480), (180, 320)])
def test_other_sizes(tmp_path: Path, width: int, height: int) -> None:
    path = tmp_path / f"{width}x{height}.mp4"
    write_demo_video(path, width=width, height=height, fps=30, n_frames=12, gop=6, seed=5)
    frames = _decode_rgb(path)
    assert len(frames) == 12
    assert frames[0].shape == (height, width, 3)
    assert [read_frame_index(f) for f in frames] == list(range(12))


def test_odd_dimensions_rejected(tmp_path: Path) -> None:
    path = tmp_path / "odd.mp4"
    with pytest.raises(ValueError, match="even"):
        write_h264(path, synthetic_frames(3, 321, 180, seed=0), fps=25, gop=5)
    assert list(tmp_path.iterdir()) == []  # temp file cleaned up


def test_atomic_write_keeps_old_file_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "v.mp4"
    write_demo_video(path, width=64, height=48, fps=10, n_frames=10, gop=5, seed=1)
    before = path.read_bytes()

    def broken() -> Iterator[np.ndarray]:
        yield from synthetic_frames(5, 64, 48, seed=9)
        raise RuntimeError("generator died")

    with pytest.raises(RuntimeError):
        write_h264(path, broken(), fps=10, gop=5)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["v.mp4"]  # no leftover temp file


def test_empty_input_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no frames"):
        write_h264(tmp_path / "e.mp4", [], fps=10, gop=5)
    assert list(tmp_path.iterdir()) == []
