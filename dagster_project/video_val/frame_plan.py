"""Frame plan for video inputs, identical to qwen-vl-utils 0.0.14 (`vision_process.py`).

Qwen-VL style models do not see a video's frames: they see the frames qwen-vl-utils picks and the
size it resizes them to. This module computes that choice (number of frames, frame indices, sample
fps, resized size) without torch, so the lakehouse can store it next to each benchmark row.

Upstream behaviour that is reproduced on purpose (see tests/test_frame_plan.py, which runs the
real upstream code against this module):

* `round_by_factor` uses Python's `round`, i.e. round half to even: `nframes=5` becomes 4.
* `smart_nframes` raises `ValueError` when the result is outside `[FRAME_FACTOR, total_frames]`
  (so any video with fewer than 2 frames) and `AssertionError` when both `fps` and `nframes`
  are given (upstream uses a bare `assert`).
* `smart_resize` raises `AssertionError` when `max_pixels < min_pixels` and `ValueError` beyond
  `MAX_RATIO`; it can return a 0 side (for example 100x1000 with max_pixels=3136), which upstream
  only fails on later, in torchvision's resize.
* The per-frame pixel cap is `max(min(768 * factor**2, total_pixels / nframes * FRAME_FACTOR),
  int(min_pixels * 1.05))`, then lowered (never raised) by the row's `max_pixels`; it may be a
  float and the ceil branch of `smart_resize` may exceed it.
* `total_pixels` defaults to `MODEL_SEQ_LEN * factor**2 * 0.9`, with `MODEL_SEQ_LEN` read from the
  environment variable of the same name at import time (0.0.14 no longer has VIDEO_TOTAL_PIXELS).
* Frame indices are `torch.linspace(0, total_frames - 1, nframes).round().long()` in float32.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dagster_project.tables import raw_schema

# Constants named and valued as in qwen_vl_utils/vision_process.py 0.0.14.
MAX_RATIO = 200
SPATIAL_MERGE_SIZE = 2
IMAGE_MIN_TOKEN_NUM = 4
IMAGE_MAX_TOKEN_NUM = 16384
VIDEO_MIN_TOKEN_NUM = 128
VIDEO_MAX_TOKEN_NUM = 768

FPS = 2.0
FRAME_FACTOR = 2
FPS_MIN_FRAMES = 4
FPS_MAX_FRAMES = 768

# Read once at import, like upstream, so both agree when the variable is set.
MODEL_SEQ_LEN = int(float(os.environ.get("MODEL_SEQ_LEN", 128000)))

Number = int | float


def round_by_factor(number: Number, factor: int) -> int:
    """Closest multiple of `factor` (Python round: ties go to the even quotient)."""
    return round(number / factor) * factor


def ceil_by_factor(number: Number, factor: int) -> int:
    """Smallest multiple of `factor` that is >= `number`."""
    return math.ceil(number / factor) * factor


def floor_by_factor(number: Number, factor: int) -> int:
    """Largest multiple of `factor` that is <= `number`."""
    return math.floor(number / factor) * factor


def smart_nframes(
    total_frames: int,
    video_fps: Number,
    *,
    fps: Number | None = None,
    min_frames: Number = FPS_MIN_FRAMES,
    max_frames: Number | None = None,
    nframes: Number | None = None,
) -> int:
    """Number of frames sampled from the video, as upstream `smart_nframes`.

    `None` stands for a key missing from upstream's element dict: `fps` then means FPS (2.0) and
    `max_frames` means `min(FPS_MAX_FRAMES, total_frames)`. `min_frames`/`max_frames` only apply
    in fps mode. Raises AssertionError if both `fps` and `nframes` are given and ValueError if the
    result is outside [FRAME_FACTOR, total_frames].
    """
    if fps is not None and nframes is not None:
        # Upstream's `assert`, raised explicitly so `python -O` does not change behaviour.
        raise AssertionError("Only accept either `fps` or `nframes`")
    if nframes is not None:
        n = round_by_factor(nframes, FRAME_FACTOR)
    else:
        fps_value = FPS if fps is None else fps
        min_n = ceil_by_factor(min_frames, FRAME_FACTOR)
        max_n = floor_by_factor(
            min(FPS_MAX_FRAMES, total_frames) if max_frames is None else max_frames, FRAME_FACTOR
        )
        raw = total_frames / video_fps * fps_value
        n = floor_by_factor(min(min(max(raw, min_n), max_n), total_frames), FRAME_FACTOR)
    if not (n >= FRAME_FACTOR and n <= total_frames):
        raise ValueError(
            f"nframes should in interval [{FRAME_FACTOR}, {total_frames}], but got {n}."
        )
    return n


def smart_resize(
    height: int,
    width: int,
    *,
    factor: int,
    min_pixels: Number | None = None,
    max_pixels: Number | None = None,
) -> tuple[int, int]:
    """(height, width) rounded to multiples of `factor` within the pixel budget, as upstream.

    Defaults are upstream's image budgets (4 and 16384 tokens of `factor`**2 pixels).
    """
    if max_pixels is None:
        max_pixels = IMAGE_MAX_TOKEN_NUM * factor**2
    if min_pixels is None:
        min_pixels = IMAGE_MIN_TOKEN_NUM * factor**2
    if not max_pixels >= min_pixels:
        raise AssertionError("The max_pixels of image must be greater than or equal to min_pixels.")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_RATIO}, "
            f"got {max(height, width) / min(height, width)}"
        )
    h_bar = max(factor, round_by_factor(height, factor))
    w_bar = max(factor, round_by_factor(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = floor_by_factor(height / beta, factor)
        w_bar = floor_by_factor(width / beta, factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = ceil_by_factor(height * beta, factor)
        w_bar = ceil_by_factor(width * beta, factor)
    return h_bar, w_bar


def _f32_round_exact(value: Fraction) -> np.float32:
    """Round an exact rational to the nearest float32, ties to even (slow path, rarely used)."""
    guess = np.float32(float(value))
    candidates = [
        np.nextafter(guess, np.float32(-np.inf)),
        guess,
        np.nextafter(guess, np.float32(np.inf)),
    ]

    def key(c: np.float32) -> tuple[Fraction, int]:
        # Nearest first; on a tie the even significand (lowest bit 0) wins.
        return abs(Fraction(float(c)) - value), int(c.view(np.uint32)) & 1

    return min(candidates, key=key)


def _fma_f32(a: np.float32, k: np.ndarray, c: np.float32, sign: int) -> np.ndarray:
    """float32 `c + sign * a * k` with a single rounding, like the FMA the compiler emits.

    a*k is exact in float64 (24-bit x 24-bit significands), so only the addition can round
    twice; those few elements are redone exactly.
    """
    prod = np.float64(a) * k.astype(np.float64) * sign
    c64 = np.float64(c)
    total = prod + c64
    # TwoSum: err is the exact rounding error of the float64 addition.
    bv = total - c64
    err = (c64 - (total - bv)) + (prod - bv)
    out = total.astype(np.float32)
    for i in np.nonzero(err != 0)[0]:
        exact = Fraction(float(prod[i])) + Fraction(float(c64))
        out[i] = _f32_round_exact(exact)
    return out


def torch_linspace_round(start: Number, end: Number, steps: int, *, fma: bool = True) -> list[int]:
    """`torch.linspace(start, end, steps).round().long().tolist()` on CPU, default float32.

    torch's CPU kernel (ATen RangeFactoriesKernel.cpp, scalar since vectorisation was removed)
    computes `step = (end - start) / (steps - 1)` in float32, then `start + step * i` for the
    first half and `end - step * (steps - 1 - i)` for the rest. The AVX2/AVX512 builds of that
    kernel (what x86-64 machines run) contract those into fused multiply-adds, which changes
    some indices; `fma=False` matches ATEN_CPU_CAPABILITY=default. `.round()` is half to even.
    """
    if steps < 0:
        raise ValueError(f"number of steps must be non-negative, got {steps}")
    if steps == 0:
        return []
    s = np.float32(start)
    e = np.float32(end)
    if steps == 1:
        values = np.array([s], dtype=np.float32)
    else:
        step = np.float32(np.float32(e - s) / np.float32(steps - 1))
        halfway = steps // 2
        idx = np.arange(steps, dtype=np.int64)
        k_first = idx[:halfway].astype(np.float32)
        k_second = (steps - 1 - idx[halfway:]).astype(np.float32)
        if fma:
            first = _fma_f32(step, k_first, s, 1)
            second = _fma_f32(step, k_second, e, -1)
        else:
            first = s + step * k_first
            second = e - step * k_second
        values = np.concatenate([first, second]).astype(np.float32)
    return np.rint(values).astype(np.int64).tolist()


@dataclass(frozen=True)
class FramePlan:
    """What qwen-vl-utils 0.0.14 feeds the model for one video; outputs are None on error."""

    total_frames: int
    video_fps: float
    height: int
    width: int
    nframes: int | None
    frame_indices: list[int]
    sample_fps: float | None
    resized_height: int | None
    resized_width: int | None
    min_pixels: Number | None
    max_pixels_used: Number | None
    patch_size: int
    error: str | None = None


def plan_video(
    *,
    total_frames: int,
    video_fps: float,
    height: int,
    width: int,
    fps: Number | None,
    max_frames: Number | None,
    min_pixels: Number | None,
    max_pixels: Number | None,
    min_frames: Number = FPS_MIN_FRAMES,
    patch_size: int = 14,
    total_pixels: Number | None = None,
    nframes: Number | None = None,
    fma: bool = True,
) -> FramePlan:
    """Frame plan of `fetch_video` for a video file (decord/torchcodec path); never raises.

    `None` for fps, max_frames, min_pixels, max_pixels or total_pixels means the key is absent
    from the element, so upstream's default applies. Invalid input, and every case where
    upstream raises, yields a plan whose `error` says why.
    """
    factor = patch_size * SPATIAL_MERGE_SIZE
    min_px = VIDEO_MIN_TOKEN_NUM * factor * factor if min_pixels is None else min_pixels

    def failed(reason: str) -> FramePlan:
        return FramePlan(
            total_frames=total_frames,
            video_fps=video_fps,
            height=height,
            width=width,
            nframes=None,
            frame_indices=[],
            sample_fps=None,
            resized_height=None,
            resized_width=None,
            min_pixels=min_px,
            max_pixels_used=None,
            patch_size=patch_size,
            error=reason,
        )

    # Same checks as upstream's calculate_video_frame_range, plus non-finite fps and bad sizes,
    # which upstream would only trip over in its decoder.
    if total_frames <= 0:
        return failed(f"total_frames must be a positive integer, got {total_frames}")
    if not (math.isfinite(video_fps) and video_fps > 0):
        return failed(f"video_fps must be a positive number, got {video_fps}")
    if height <= 0 or width <= 0:
        return failed(f"frame size must be positive, got {height}x{width}")
    if patch_size <= 0:
        return failed(f"patch_size must be positive, got {patch_size}")

    try:
        n = smart_nframes(
            total_frames,
            video_fps,
            fps=fps,
            min_frames=min_frames,
            max_frames=max_frames,
            nframes=nframes,
        )
        indices = torch_linspace_round(0, total_frames - 1, n, fma=fma)
        sample_fps = n / max(total_frames, 1e-6) * video_fps
        # Same expression order as upstream so float results match bit for bit.
        if total_pixels is None:
            total_pixels = MODEL_SEQ_LEN * factor * factor * 0.9
        cap = max(
            min(VIDEO_MAX_TOKEN_NUM * factor * factor, total_pixels / n * FRAME_FACTOR),
            int(min_px * 1.05),
        )
        max_px = cap if max_pixels is None else min(max_pixels, cap)
        resized_h, resized_w = smart_resize(
            height, width, factor=factor, min_pixels=min_px, max_pixels=max_px
        )
    except (AssertionError, ArithmeticError, ValueError, TypeError) as exc:
        return failed(f"{type(exc).__name__}: {exc}")
    if resized_h <= 0 or resized_w <= 0:
        # Upstream returns this size and then torchvision's resize fails on it.
        return failed(f"resized size {resized_h}x{resized_w} is empty (max_pixels={max_px})")
    return FramePlan(
        total_frames=total_frames,
        video_fps=video_fps,
        height=height,
        width=width,
        nframes=n,
        frame_indices=indices,
        sample_fps=sample_fps,
        resized_height=resized_h,
        resized_width=resized_w,
        min_pixels=min_px,
        max_pixels_used=max_px,
        patch_size=patch_size,
        error=None,
    )


# raw_vv_frame_plan: what plan_video computes per (video, settings)
FRAME_PLAN_SCHEMA = raw_schema("vv_frame_plan")
