"""The packet index of a video: one demux pass (no decoding) records packet order, timestamps,
keyframes and the GOP structure of the first video stream and, for H.264, which packets are
reference pictures (see h264.py). `extract.py` plans its decoding from this index.

Times are stream times, `pts * time_base` in seconds, as in the container.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import av.error
from av.container import InputContainer
from av.video.stream import VideoStream

from dagster_project.media.h264 import _H264Scan
from dagster_project.media.probe import _capture_libav_logs, _LogList, _reason

# Errors PyAV/FFmpeg raise for unreadable or corrupt input (see probe.py).
_AV_ERRORS: tuple[type[BaseException], ...] = (av.error.FFmpegError, OSError, ValueError)

# Float request times such as k/fps land a hair below the exact frame time; treat a frame whose
# pts is within this tolerance after t as shown at t.
_TIME_EPS = Fraction(1, 1_000_000)


class VideoError(ValueError):
    """A video cannot be indexed or yields no decodable frame; the message names the file."""


@dataclass(frozen=True)
class VideoIndex:
    """What one demux pass learns about the first video stream (nothing is decoded).

    Frame lists (`pts`) are in presentation order; `pkt_*` lists are per packet in file
    (decode) order. Frame i is packet `frame_pkt[i]`.
    """

    path: str
    time_base: Fraction  # of `pts` (1/rate for raw streams whose pts we derive, see below)
    pts: list[int]  # presentation pts sorted ascending = frame order
    keyframe_pts: list[int]
    first_pts: int
    last_pts: int
    frame_count: int
    width: int
    height: int
    codec: str
    container_format: str
    pkt_pts: list[int | None]  # None: packet carries no picture (e.g. parameter sets only)
    pkt_dts: list[int | None]
    pkt_size: list[int]
    pkt_key: list[bool]
    pkt_shown: list[bool]  # False: never presented (edit-list discard, no picture)
    pkt_idr: list[bool]  # H.264 IDR (closed GOP start); False when unknown
    # H.264: nal_ref_idc != 0 in any slice (or carries parameter sets). False means provably
    # safe to leave out when no target needs it; None means unknown, so it is always fed.
    pkt_ref: list[bool | None]
    frame_pkt: list[int]  # frame index -> packet position
    gop_starts: list[int]  # packet positions of keyframes; always starts with 0
    nonref_skippable: bool  # H.264 parsed with confidence (progressive, NAL framing known)
    synthetic_pts: bool  # raw stream without timestamps: pts = display rank from H.264 POC
    seekable: bool  # packets can be recognised by pts after a seek
    demux_error: str | None  # demuxing stopped early (truncated/damaged file)
    _frame_of_pts: dict[int, int] = field(repr=False, compare=False)
    _pkt_of_pts: dict[int, int] = field(repr=False, compare=False)

    def time_of(self, frame_index: int) -> float:
        """Presentation time in seconds of frame `frame_index` (0-based, presentation order)."""
        return float(self.pts[frame_index] * self.time_base)

    def frame_at_time(self, t: float) -> tuple[int, bool]:
        """(index of the frame shown at t, clamped): the last frame with pts <= t after
        clamping t into [first, last] frame time. clamped says t was outside that range."""
        if not math.isfinite(t):
            raise ValueError(f"request time must be finite, got {t!r}")
        ticks = Fraction(t) / self.time_base
        eps = _TIME_EPS / self.time_base
        if ticks + eps < self.first_pts:
            return 0, True
        i = bisect_right(self.pts, ticks + eps) - 1
        return i, ticks - eps > self.last_pts

    def frame_of_pts(self, pts: int) -> int | None:
        return self._frame_of_pts.get(pts)

    def packet_of_pts(self, pts: int) -> int | None:
        return self._pkt_of_pts.get(pts)

    def gop_of(self, pos: int) -> int:
        """GOP number (index into gop_starts) of the packet at file position `pos`."""
        return bisect_right(self.gop_starts, pos) - 1

    def gop_end(self, gop: int) -> int:
        """Last packet position (inclusive) of GOP `gop`."""
        if gop + 1 < len(self.gop_starts):
            return self.gop_starts[gop + 1] - 1
        return len(self.pkt_pts) - 1


def _open_video(path: str, logs: _LogList) -> tuple[InputContainer, VideoStream]:
    if not Path(path).is_file():
        raise VideoError(f"{path}: cannot open: file not found")
    mark = len(logs)
    try:
        container = av.open(path, mode="r")
    except _AV_ERRORS as exc:
        raise VideoError(f"{path}: cannot open: {_reason(exc, logs, mark)}") from exc
    if not container.streams.video:
        container.close()
        raise VideoError(f"{path}: no video stream")
    stream = container.streams.video[0]
    if stream.codec_context is None:
        container.close()
        raise VideoError(f"{path}: no decoder for the video codec in this FFmpeg build")
    return container, stream


def index_video(path: str | Path) -> VideoIndex:
    """Index the first video stream with one demux pass (no decoding).

    Raises VideoError for unreadable files, files without a video stream and streams without
    any video packet.
    """
    spath = str(path)
    with _capture_libav_logs() as logs:
        container, stream = _open_video(spath, logs)
        with container:
            return _index(spath, container, stream, logs)


def _index(path: str, container: InputContainer, stream: VideoStream, logs: _LogList) -> VideoIndex:
    ctx = stream.codec_context
    codec = ctx.name
    is_h264 = codec == "h264"
    h264 = _H264Scan(bytes(ctx.extradata or b"")) if is_h264 else None

    pkt_pts: list[int | None] = []
    pkt_dts: list[int | None] = []
    pkt_size: list[int] = []
    pkt_key: list[bool] = []
    pkt_shown: list[bool] = []
    demux_error: str | None = None
    mark = len(logs)
    try:
        for packet in container.demux(stream):
            if packet.size == 0 or (packet.pts is None and packet.dts is None and h264 is None):
                continue  # the empty flush packet PyAV yields at EOF
            pkt_pts.append(packet.pts)
            pkt_dts.append(packet.dts)
            pkt_size.append(packet.size)
            pkt_key.append(bool(packet.is_keyframe))
            pkt_shown.append(not packet.is_discard)
            if h264 is not None:
                h264.scan(memoryview(packet))
    except _AV_ERRORS as exc:
        demux_error = f"demux stopped after {len(pkt_pts)} packets: {_reason(exc, logs, mark)}"

    n_pkts = len(pkt_pts)
    synthetic = False
    time_base = stream.time_base or Fraction(1, 90000)
    if any(p is None for p in pkt_pts):
        # Raw elementary streams carry no timestamps: derive the presentation order from the
        # H.264 picture order count and number frames 0, 1, 2, ... at the nominal rate.
        if h264 is None:
            raise VideoError(f"{path}: video packets without timestamps ({codec}): unsupported")
        ranks = h264.display_ranks()
        if ranks is None:
            raise VideoError(f"{path}: cannot order frames of this raw H.264 stream")
        pkt_pts = list(ranks)
        pkt_shown = [s and r is not None for s, r in zip(pkt_shown, ranks, strict=True)]
        rate = stream.average_rate or stream.guessed_rate or Fraction(25)
        time_base = Fraction(1) / Fraction(rate)
        synthetic = True
    else:
        # Packets carrying no picture (only parameter sets) are fed but never presented.
        if h264 is not None:
            pkt_shown = [s and h for s, h in zip(pkt_shown, h264.has_slice, strict=True)]

    shown = sorted(
        (pts, pos) for pos, pts in enumerate(pkt_pts) if pkt_shown[pos] and pts is not None
    )
    if not shown:
        reason = f" ({demux_error})" if demux_error else ""
        raise VideoError(f"{path}: no video frames{reason}")
    frame_pts = [p for p, _ in shown]
    frame_pkt = [pos for _, pos in shown]
    frame_of_pts: dict[int, int] = {}
    for i, p in enumerate(frame_pts):
        frame_of_pts.setdefault(p, i)
    pkt_of_pts: dict[int, int] = {}
    unique = True
    for pos, p in enumerate(pkt_pts):
        if p is None:
            continue
        if p in pkt_of_pts:
            unique = False
        pkt_of_pts.setdefault(p, pos)
    gop_starts = [pos for pos, key in enumerate(pkt_key) if key]
    if not gop_starts or gop_starts[0] != 0:
        gop_starts.insert(0, 0)  # packets before the first keyframe form a pseudo GOP
    keyframe_pts = sorted(
        p for p, key in zip(pkt_pts, pkt_key, strict=True) if key and p is not None
    )

    if h264 is not None:
        pkt_idr = list(h264.idr)
        pkt_ref: list[bool | None] = list(h264.ref)
        skippable = h264.confident()
    else:
        pkt_idr = [False] * n_pkts
        pkt_ref = [None] * n_pkts
        skippable = False
    return VideoIndex(
        path=path,
        time_base=Fraction(time_base),
        pts=frame_pts,
        keyframe_pts=keyframe_pts,
        first_pts=frame_pts[0],
        last_pts=frame_pts[-1],
        frame_count=len(frame_pts),
        width=stream.width or ctx.width,
        height=stream.height or ctx.height,
        codec=codec,
        container_format=container.format.name,
        pkt_pts=pkt_pts,
        pkt_dts=pkt_dts,
        pkt_size=pkt_size,
        pkt_key=pkt_key,
        pkt_shown=pkt_shown,
        pkt_idr=pkt_idr,
        pkt_ref=pkt_ref,
        frame_pkt=frame_pkt,
        gop_starts=gop_starts,
        nonref_skippable=skippable,
        synthetic_pts=synthetic,
        seekable=unique and not synthetic,
        demux_error=demux_error,
        _frame_of_pts=frame_of_pts,
        _pkt_of_pts=pkt_of_pts,
    )
