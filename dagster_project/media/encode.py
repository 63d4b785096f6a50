"""Deterministic synthetic video generation and H.264 (MP4) encoding with PyAV.

Demo benchmark videos must be reproducible: the same arguments always give the same bytes, so
content hashes in the lakehouse stay stable across runs, processes and machines sharing one
FFmpeg/x264 build (the PyAV wheel of the lock).

Two things make that hold (see `write_h264`):

- **x264's kernel set is chosen, not detected.** On a CPU with AVX-512, x264 (core 165, in the
  PyAV 18 wheel) picks AVX-512 kernels that read pixels outside the picture: the padding at the
  end of each row of the input frame and rows below a height that is not a multiple of 16. Those
  bytes are uninitialised heap, so the stream depended on what the process had allocated before
  (measured: the same 320x180 clip gave a different file after encoding an 854x480 one; random
  bytes in the row padding changed the output of every encode). With the AVX2 kernel set, or
  with x264's plain C, padding content and encode order change nothing. `X264_ASM` names the set
  explicitly, so the bytes also stop depending on which further features (cache line size, fast
  SSE2, AVX-512) the CPU reports.
- **RGB -> YUV 4:2:0 is our own integer arithmetic** (`rgb_to_yuv420p`), not libswscale, whose
  SIMD paths are selected per CPU as well: the encoder receives exactly defined planes.
"""

from __future__ import annotations

import functools
import os
import platform
import uuid
import zlib
from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

# Frame-index barcode drawn along the top edge: 16 cells, MSB first, white = 1. Big cells of
# pure black/white survive lossy coding, so decoded frames can be identified exactly.
CODE_BITS = 16
_CODE_ROWS_FRACTION = 0.06  # barcode height as a fraction of the frame height


def _code_geometry(width: int, height: int) -> tuple[int, int] | None:
    """(cell width, barcode height) or None if the frame is too small to carry a code."""
    cell_w = width // CODE_BITS
    code_h = max(4, int(round(height * _CODE_ROWS_FRACTION)))
    if cell_w < 4 or height < 4 * code_h:
        return None
    return cell_w, code_h


def read_frame_index(frame: np.ndarray) -> int | None:
    """Read the frame index (mod 2**16) drawn by `synthetic_frames`; None if frame too small.

    Samples the centre of each cell's luma so coding noise at cell edges does not matter.
    """
    height, width = frame.shape[:2]
    geom = _code_geometry(width, height)
    if geom is None:
        return None
    cell_w, code_h = geom
    y = code_h // 2
    value = 0
    for bit in range(CODE_BITS):
        x = bit * cell_w + cell_w // 2
        luma = float(frame[y, x, :3].astype(np.float32).mean())  # mean RGB ~ brightness
        value = (value << 1) | int(luma >= 128.0)
    return value


def synthetic_frames(
    n_frames: int, width: int, height: int, seed: int, label: str = ""
) -> Iterator[np.ndarray]:
    """Yield `n_frames` HxWx3 uint8 RGB frames with moving, seed-dependent content.

    Content: a drifting colour gradient, three discs on seed-dependent Lissajous paths, a
    frame-index barcode along the top (see `read_frame_index`) and a progress bar at the bottom.
    `label` is mixed into the RNG seed (via CRC32, which is stable across processes, unlike
    `hash`) so differently labelled videos differ even with the same seed.
    """
    if n_frames < 0:
        raise ValueError(f"n_frames must be >= 0, got {n_frames}")
    if width < 2 or height < 2:
        raise ValueError(f"frame size must be at least 2x2, got {width}x{height}")

    rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(label.encode("utf-8"))])

    # Static gradient parts computed once; per frame only an offset is added (fast path).
    xs = np.linspace(0.0, 255.0, width, dtype=np.float32)[None, :]
    ys = np.linspace(0.0, 255.0, height, dtype=np.float32)[:, None]
    tint = rng.uniform(0.0, 255.0, size=3).astype(np.float32)
    base = np.empty((height, width, 3), dtype=np.float32)
    base[..., 0] = xs * 0.6 + tint[0] * 0.4
    base[..., 1] = ys * 0.6 + tint[1] * 0.4
    base[..., 2] = (xs + ys) * 0.3 + tint[2] * 0.4
    base_u8 = base.astype(np.uint8)
    drift = rng.uniform(1.0, 3.0, size=3).round().astype(np.uint8)  # per-channel hue drift

    n_discs = 3
    radius = max(2, min(width, height) // 10)
    colors = rng.integers(0, 256, size=(n_discs, 3), dtype=np.uint8)
    freq = rng.uniform(0.02, 0.08, size=(n_discs, 2))  # radians per frame, x and y
    phase = rng.uniform(0.0, 2.0 * np.pi, size=(n_discs, 2))
    # Disc stencil computed once; drawn only over its bounding box.
    yy, xx = np.mgrid[-radius : radius + 1, -radius : radius + 1]
    stencil = (xx * xx + yy * yy) <= radius * radius

    geom = _code_geometry(width, height)
    bar_h = max(2, height // 40)

    for i in range(n_frames):
        frame = base_u8 + (drift * np.uint8(i % 256))  # uint8 wraps: a cyclic colour drift
        for d in range(n_discs):
            cx = int(round((width - 1) * (0.5 + 0.4 * np.sin(freq[d, 0] * i + phase[d, 0]))))
            cy = int(round((height - 1) * (0.5 + 0.4 * np.sin(freq[d, 1] * i + phase[d, 1]))))
            x0, x1 = max(cx - radius, 0), min(cx + radius + 1, width)
            y0, y1 = max(cy - radius, 0), min(cy + radius + 1, height)
            sub = stencil[
                y0 - (cy - radius) : y1 - (cy - radius), x0 - (cx - radius) : x1 - (cx - radius)
            ]
            frame[y0:y1, x0:x1][sub] = colors[d]
        if geom is not None:
            cell_w, code_h = geom
            frame[:code_h, : CODE_BITS * cell_w] = 0
            for bit in range(CODE_BITS):
                if (i >> (CODE_BITS - 1 - bit)) & 1:
                    frame[:code_h, bit * cell_w : (bit + 1) * cell_w] = 255
        progress = int(round(width * (i + 1) / max(n_frames, 1)))
        frame[height - bar_h :, :] = 0
        frame[height - bar_h :, :progress] = 255
        yield frame


def rgb_to_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """HxWx3 uint8 RGB -> the (H*3/2)xW yuv420p layout `VideoFrame.from_ndarray` takes.

    BT.601 limited range in 8-bit fixed point (the coefficients of ITU-R BT.601 scaled by 256,
    as libswscale's default for RGB -> yuv420p); chroma is the rounded mean of each 2x2 block.
    Integer arithmetic only, so every machine computes the same planes."""
    h, w = rgb.shape[:2]
    r, g, b = (rgb[..., k].astype(np.int32) for k in range(3))
    y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16
    u = ((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128
    v = ((112 * r - 94 * g - 18 * b + 128) >> 8) + 128

    def subsample(plane: np.ndarray) -> np.ndarray:
        blocks = plane.reshape(h // 2, 2, w // 2, 2).sum(axis=(1, 3))
        return ((blocks + 2) >> 2).astype(np.uint8).reshape(-1)

    planes = [y.astype(np.uint8).reshape(-1), subsample(u), subsample(v)]
    return np.concatenate(planes).reshape(h * 3 // 2, w)


@functools.cache
def x264_asm() -> str:
    """The value of x264's `asm` parameter: the AVX2 kernel set on an x86-64 CPU that has AVX2
    (x264's name `AVX2` = SSE..SSE4.2, AVX, FMA3, LZCNT, BMI1/2, AVX2), else `0` (plain C).

    Never x264's own detection: it would pick AVX-512 where available (see the module notes).
    The flags come from /proc/cpuinfo, which lists only what the kernel enabled."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "0"
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return "0"
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            break
    return "AVX2" if {"avx2", "fma", "bmi1", "bmi2", "abm"} <= flags else "0"


def write_h264(
    path: Path,
    frames: Iterable[np.ndarray],
    *,
    fps: int,
    gop: int,
    bframes: int = 2,
    crf: int = 28,
    preset: str = "veryfast",
) -> None:
    """Encode RGB frames to an H.264 (libx264, yuv420p) MP4 at `path`, byte-reproducibly.

    Keyframes (IDR) fall exactly every `gop` frames. Writes to a temp file in the target folder
    and renames it into place, so readers never see a half-written video.
    """
    if fps <= 0 or gop <= 0 or bframes < 0:
        raise ValueError(f"need fps > 0, gop > 0, bframes >= 0 (got {fps=}, {gop=}, {bframes=})")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique name rather than mkstemp: mkstemp creates mode 0600 and os.replace would keep it,
    # leaving the video unreadable to other users; FFmpeg creating the file honours the umask.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        _encode(tmp, frames, fps=fps, gop=gop, bframes=bframes, crf=crf, preset=preset)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _encode(
    path: Path,
    frames: Iterable[np.ndarray],
    *,
    fps: int,
    gop: int,
    bframes: int,
    crf: int,
    preset: str,
) -> None:
    x264_params = ":".join(
        [
            f"keyint={gop}",
            f"min-keyint={gop}",  # regular GOPs: no early keyframes ...
            "scenecut=0",  # ... and none inserted on scene cuts
            f"bframes={bframes}",
            "threads=1",  # x264 output depends on thread count; pin it for byte-identity
            f"asm={x264_asm()}",  # a fixed kernel set, never AVX-512 (module notes)
        ]
    )
    # fflags=+bitexact stops the mp4 muxer writing the "Lavf..." encoder tag; no creation_time
    # is set, so no wall-clock timestamps end up in the file either.
    with av.open(
        str(path), mode="w", format="mp4", container_options={"fflags": "+bitexact"}
    ) as container:
        stream = container.add_stream(
            "libx264",
            rate=fps,
            options={
                "preset": preset,
                "crf": str(crf),
                "x264-params": x264_params,
                "flags": "+bitexact",
            },
        )
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = Fraction(1, fps)
        stream.codec_context.thread_count = 1
        stream.codec_context.thread_type = "NONE"

        size: tuple[int, int] | None = None
        for i, rgb in enumerate(frames):
            if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
                raise ValueError(f"frame {i}: expected HxWx3 uint8, got {rgb.shape} {rgb.dtype}")
            h, w = rgb.shape[:2]
            if size is None:
                if w % 2 or h % 2:
                    raise ValueError(f"yuv420p needs even dimensions, got {w}x{h}")
                size = (w, h)
                stream.width, stream.height = w, h
            elif size != (w, h):
                raise ValueError(f"frame {i}: size {w}x{h} differs from first frame {size}")
            frame = av.VideoFrame.from_ndarray(rgb_to_yuv420p(rgb), format="yuv420p")
            frame.pts = i
            frame.time_base = Fraction(1, fps)
            container.mux(stream.encode(frame))
        if size is None:
            raise ValueError("no frames to encode")
        container.mux(stream.encode(None))  # flush delayed (B-frame) packets


def write_demo_video(
    path: Path,
    *,
    width: int,
    height: int,
    fps: int,
    n_frames: int,
    gop: int,
    seed: int,
    bframes: int = 2,
    label: str = "",
) -> None:
    """Generate `synthetic_frames` and encode them to `path` with `write_h264`."""
    write_h264(
        path,
        synthetic_frames(n_frames, width, height, seed, label=label),
        fps=fps,
        gop=gop,
        bframes=bframes,
    )
