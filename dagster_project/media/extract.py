"""Frame-accurate, fast frame extraction with PyAV.

Why not just seek and decode? Measured on this machine class (shared/notes/frame-decoding.md):
seeking before every target costs up to 3x a full decode on long GOPs, and a plain forward pass
decodes everything. What is cheapest while staying bit-exact to a full sequential decode:

1. one demux pass (no decoding) builds a `VideoIndex`: packet order, timestamps, keyframes and,
   for H.264, which packets are reference pictures (NAL `nal_ref_idc`);
2. the targets are sorted by pts and mapped to the packets they depend on: from their GOP's
   keyframe on, every reference packet up to the target, plus the target itself;
3. one forward pass feeds only those packets to a single-threaded decoder, seeking (and
   verifying where the seek landed) only when whole GOPs can be skipped.

Targets are recognised on the decoder's output by pts, so reordering never mixes them up. A
target that does not come out (damaged or truncated stream) is re-decoded without shortcuts and,
if it still does not decode, replaced by the last frame before it that does (recorded as
clamped).

Times are stream times, `pts * time_base` in seconds, as in the container (a stream starting at
+3 s has its first frame at 3.0); requests outside [first, last] frame are clamped.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from io import BytesIO
from pathlib import Path

import av
import av.error
import numpy as np
from av.container import InputContainer
from av.packet import Packet
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from PIL import Image

from dagster_project.media.probe import _capture_libav_logs, _LogList, _reason

# Errors PyAV/FFmpeg raise for unreadable or corrupt input (see probe.py).
_AV_ERRORS: tuple[type[BaseException], ...] = (av.error.FFmpegError, OSError, ValueError)

# Float request times such as k/fps land a hair below the exact frame time; treat a frame whose
# pts is within this tolerance after t as shown at t.
_TIME_EPS = Fraction(1, 1_000_000)

# Seek targets to try (the GOP itself, then earlier ones) before restarting from the file start:
# demuxers that seek by DTS or bytes (MPEG-TS) can land a GOP late.
_SEEK_ATTEMPTS = 3

# H.264 NAL unit types (ITU-T H.264 table 7-1).
_NAL_SLICE, _NAL_IDR, _NAL_SEI, _NAL_SPS, _NAL_PPS, _NAL_AUD, _NAL_FILLER = 1, 5, 6, 7, 8, 9, 12
# NAL types that may ride along in a packet we drop (they change no decoder state we rely on).
_DROPPABLE_EXTRA = frozenset({_NAL_SEI, _NAL_AUD, _NAL_FILLER})
_SEI_RECOVERY_POINT = 6
_HIGH_PROFILES = frozenset({100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135})


class VideoError(ValueError):
    """A video cannot be indexed or yields no decodable frame; the message names the file."""


# --------------------------------------------------------------------------------------------
# Index
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# H.264 bitstream reading (NAL headers, SPS, PPS, slice header prefix)
# --------------------------------------------------------------------------------------------


class _ParseError(Exception):
    pass


class _Bits:
    """MSB-first bit reader over an RBSP (emulation-prevention bytes already removed)."""

    def __init__(self, rbsp: bytes) -> None:
        self._value = int.from_bytes(rbsp, "big")
        self._left = len(rbsp) * 8

    def u(self, n: int) -> int:
        if n > self._left:
            raise _ParseError("read past end of NAL")
        self._left -= n
        return (self._value >> self._left) & ((1 << n) - 1)

    def ue(self) -> int:
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
            if zeros > 31:
                raise _ParseError("bad exp-Golomb code")
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self) -> int:
        k = self.ue()
        return (k + 1) // 2 if k % 2 else -(k // 2)


def _rbsp(nal: bytes) -> bytes:
    # Drop emulation-prevention bytes (00 00 03 -> 00 00); replace() scans left to right, which
    # is exactly how the escaping was applied.
    return nal.replace(b"\x00\x00\x03", b"\x00\x00")


@dataclass(frozen=True)
class _Sps:
    log2_max_frame_num: int
    poc_type: int
    log2_max_poc_lsb: int
    frame_mbs_only: bool
    separate_colour_plane: bool


def _parse_sps(nal: bytes) -> tuple[int, _Sps]:
    b = _Bits(_rbsp(nal[1:64]))  # everything we read sits in the first few dozen bytes
    profile_idc = b.u(8)
    b.u(16)  # constraint flags, level_idc
    sps_id = b.ue()
    separate = False
    if profile_idc in _HIGH_PROFILES:
        chroma_format_idc = b.ue()
        if chroma_format_idc == 3:
            separate = bool(b.u(1))
        b.ue()  # bit_depth_luma_minus8
        b.ue()  # bit_depth_chroma_minus8
        b.u(1)  # qpprime_y_zero_transform_bypass_flag
        if b.u(1):  # seq_scaling_matrix_present_flag
            for i in range(12 if chroma_format_idc == 3 else 8):
                if b.u(1):
                    last = nxt = 8
                    for _ in range(16 if i < 6 else 64):
                        if nxt:
                            nxt = (last + b.se() + 256) % 256
                        last = nxt or last
    log2_max_frame_num = b.ue() + 4
    poc_type = b.ue()
    log2_max_poc_lsb = 0
    if poc_type == 0:
        log2_max_poc_lsb = b.ue() + 4
    elif poc_type == 1:
        b.u(1)
        b.se()
        b.se()
        for _ in range(b.ue()):
            b.se()
    elif poc_type != 2:
        raise _ParseError(f"bad pic_order_cnt_type {poc_type}")
    b.ue()  # max_num_ref_frames
    b.u(1)  # gaps_in_frame_num_value_allowed_flag
    b.ue()  # pic_width_in_mbs_minus1
    b.ue()  # pic_height_in_map_units_minus1
    frame_mbs_only = bool(b.u(1))
    return sps_id, _Sps(log2_max_frame_num, poc_type, log2_max_poc_lsb, frame_mbs_only, separate)


def _first_sei_is_recovery_point(nal: bytes) -> bool:
    rbsp = _rbsp(nal[1:16])
    payload_type = 0
    for byte in rbsp:
        payload_type += byte
        if byte != 0xFF:
            break
    return payload_type == _SEI_RECOVERY_POINT


class _H264Scan:
    """Per-packet facts from NAL headers, collected during the demux pass.

    Packets are length-prefixed NAL units in MP4/MKV (avcC extradata gives the prefix size) and
    start-code delimited (Annex B) in MPEG-TS and raw .h264.
    """

    def __init__(self, extradata: bytes) -> None:
        self.ref: list[bool | None] = []
        self.idr: list[bool] = []
        self.has_slice: list[bool] = []
        self._sps: dict[int, _Sps] = {}
        self._pps_sps: dict[int, int] = {}
        self._unsure = False
        # First-slice header prefix per packet for POC ordering of raw streams:
        # (nal_ref_idc, is_idr, pps_id, frame_num, poc_lsb) or None.
        self._slice: list[tuple[int, bool, int, int, int] | None] = []
        self._length_size = 0  # 0 = Annex B
        if extradata[:1] == b"\x01" and len(extradata) >= 7:
            self._length_size = (extradata[4] & 3) + 1
            try:
                self._parse_avcc(extradata)
            except (_ParseError, IndexError):
                self._unsure = True
        elif extradata:
            try:
                for start, end in _annexb_nals(extradata):
                    self._param_set(extradata[start:end])
            except (_ParseError, IndexError):
                self._unsure = True

    def _parse_avcc(self, data: bytes) -> None:
        pos = 5
        for count_mask in (0x1F, 0xFF):  # SPS list, then PPS list
            count = data[pos] & count_mask
            pos += 1
            for _ in range(count):
                size = int.from_bytes(data[pos : pos + 2], "big")
                self._param_set(data[pos + 2 : pos + 2 + size])
                pos += 2 + size

    def _param_set(self, nal: bytes) -> None:
        if not nal:
            return
        kind = nal[0] & 0x1F
        if kind == _NAL_SPS:
            sps_id, sps = _parse_sps(nal)
            self._sps[sps_id] = sps
        elif kind == _NAL_PPS:
            b = _Bits(_rbsp(nal[1:16]))
            pps_id = b.ue()
            self._pps_sps[pps_id] = b.ue()

    def confident(self) -> bool:
        # Dropping pictures is only safe when we read every packet's NAL framing and the stream
        # is progressive: with field pictures one packet may hold half a frame.
        return (
            not self._unsure
            and bool(self._sps)
            and all(s.frame_mbs_only for s in self._sps.values())
        )

    def scan(self, data: memoryview) -> None:
        try:
            ref, idr, has_slice, first = self._classify(data)
        except (_ParseError, IndexError, ValueError):
            self._unsure = True
            ref, idr, has_slice, first = None, False, True, None
        self.ref.append(ref)
        self.idr.append(idr)
        self.has_slice.append(has_slice)
        self._slice.append(first)

    def _nals(self, data: memoryview) -> Iterator[tuple[int, int]]:
        if self._length_size == 0:
            yield from _annexb_nals(bytes(data))
            return
        size_len = self._length_size
        pos, end = 0, len(data)
        while pos < end:
            if pos + size_len > end:
                raise _ParseError("truncated NAL length")
            size = int.from_bytes(data[pos : pos + size_len], "big")
            pos += size_len
            if size == 0 or pos + size > end:
                raise _ParseError("NAL length past packet end")
            yield pos, pos + size
            pos += size

    def _classify(
        self, data: memoryview
    ) -> tuple[bool | None, bool, bool, tuple[int, bool, int, int, int] | None]:
        ref = False
        idr = False
        has_slice = False
        first: tuple[int, bool, int, int, int] | None = None
        for start, end in self._nals(data):
            header = data[start]
            if header & 0x80:
                raise _ParseError("forbidden_zero_bit set")
            kind = header & 0x1F
            ref_idc = header >> 5
            if kind in (_NAL_SLICE, _NAL_IDR):
                has_slice = True
                idr = idr or kind == _NAL_IDR
                ref = ref or ref_idc != 0
                if first is None:
                    first = self._slice_prefix(bytes(data[start : min(end, start + 48)]))
            elif kind in (_NAL_SPS, _NAL_PPS):
                self._param_set(bytes(data[start:end]))
                ref = True  # parameter sets must always reach the decoder
            elif kind == _NAL_SEI:
                if _first_sei_is_recovery_point(bytes(data[start : min(end, start + 16)])):
                    ref = True  # recovery points steer the decoder's random-access state
            elif kind not in _DROPPABLE_EXTRA:
                ref = True  # anything else (end of sequence, partitions, ...): keep
        if not has_slice:
            return True, idr, False, None
        return ref, idr, True, first

    def _slice_prefix(self, nal: bytes) -> tuple[int, bool, int, int, int] | None:
        """(nal_ref_idc, idr, pps_id, frame_num, pic_order_cnt_lsb) of a slice, or None."""
        ref_idc, is_idr = nal[0] >> 5, (nal[0] & 0x1F) == _NAL_IDR
        b = _Bits(_rbsp(nal[1:]))
        b.ue()  # first_mb_in_slice
        b.ue()  # slice_type
        pps_id = b.ue()
        sps = self._sps.get(self._pps_sps.get(pps_id, -1))
        if sps is None:
            return None
        if sps.separate_colour_plane:
            b.u(2)
        frame_num = b.u(sps.log2_max_frame_num)
        if not sps.frame_mbs_only and b.u(1):  # field_pic_flag
            b.u(1)
        if is_idr:
            b.ue()  # idr_pic_id
        poc_lsb = b.u(sps.log2_max_poc_lsb) if sps.poc_type == 0 else 0
        return ref_idc, is_idr, pps_id, frame_num, poc_lsb

    def display_ranks(self) -> list[int | None] | None:
        """Presentation rank of each packet (None: no picture) from the picture order count.

        Only POC type 0 (explicit lsb) and type 2 (output order = decode order) are handled;
        memory_management_control_operation 5 is not (it would need the full slice header).
        """
        keys: list[tuple[int, int, int]] = []
        epoch = -1
        prev_msb = prev_lsb = 0
        for pos, first in enumerate(self._slice):
            if first is None:
                if self.has_slice[pos]:
                    return None  # a picture we could not place
                continue
            ref_idc, is_idr, pps_id, _frame_num, lsb = first
            sps = self._sps[self._pps_sps[pps_id]]
            if sps.poc_type == 1:
                return None
            if is_idr or epoch < 0:
                epoch += 1
                prev_msb = prev_lsb = 0
            if sps.poc_type == 2:
                keys.append((epoch, pos, pos))
                continue
            max_lsb = 1 << sps.log2_max_poc_lsb
            if lsb < prev_lsb and prev_lsb - lsb >= max_lsb // 2:
                msb = prev_msb + max_lsb
            elif lsb > prev_lsb and lsb - prev_lsb > max_lsb // 2:
                msb = prev_msb - max_lsb
            else:
                msb = prev_msb
            if ref_idc:
                prev_msb, prev_lsb = msb, lsb
            keys.append((epoch, msb + lsb, pos))
        ranks: list[int | None] = [None] * len(self._slice)
        for rank, (_, _, pos) in enumerate(sorted(keys)):
            ranks[pos] = rank
        return ranks


def _annexb_nals(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each NAL unit (header byte first) in start-code delimited data."""
    starts: list[int] = []
    pos = data.find(b"\x00\x00\x01")
    while pos >= 0:
        starts.append(pos + 3)
        pos = data.find(b"\x00\x00\x01", pos + 3)
    for i, start in enumerate(starts):
        end = starts[i + 1] - 3 if i + 1 < len(starts) else len(data)
        while end > start and data[end - 1] == 0:  # zero_byte / trailing_zero_8bits
            end -= 1
        if end > start:
            yield start, end


# --------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtractedFrame:
    request_no: int  # position in the caller's request list (times first, then indices)
    requested_s: float | None
    requested_index: int | None
    used_s: float  # presentation time of the returned frame
    pts: int
    frame_index: int
    clamped: bool  # request outside the decodable range, or its frame did not decode
    width: int  # of `rgb`
    height: int
    rgb: np.ndarray  # HxWx3 uint8


@dataclass
class ExtractStats:
    """Counters from one `extract_frames` call (pass an instance to fill it)."""

    targets: int = 0  # distinct target frames
    packets_planned: int = 0  # packets the plan sends to the decoder
    packets_demuxed: int = 0  # packets read from the container during extraction
    packets_sent: int = 0  # packets sent to the decoder (all passes)
    nonref_skipped: int = 0  # non-reference packets left out inside decoded GOPs
    gops_decoded: int = 0
    frames_decoded: int = 0  # frames that came out of the decoder
    frames_converted: int = 0  # frames converted to RGB
    decode_errors: int = 0
    seeks: int = 0
    restarts: int = 0  # reopened the file to read from the start (seek landed late, desync)
    fallback_passes: int = 0  # extra passes for targets that did not decode in the plan


@dataclass
class _Target:
    pts: int
    frame_index: int
    requests: list[tuple[int, float | None, int | None, bool]]  # (no, t, index, clamped)


class _Desync(Exception):
    """The packets read do not match the index (the file changed or the demuxer misbehaves)."""


def _to_rgb(frame: VideoFrame, size: tuple[int, int] | None) -> np.ndarray:
    if size is None:
        return frame.to_ndarray(format="rgb24")
    width, height = size
    return frame.reformat(
        width=width, height=height, format="rgb24", interpolation="BICUBIC"
    ).to_ndarray()


def _configure_decoder(stream: VideoStream) -> None:
    # One thread: best throughput per core (measured); frame threading also adds latency.
    stream.codec_context.thread_type = "NONE"
    stream.codec_context.thread_count = 1


class _Reader:
    """Reads packets of the indexed stream and knows each one's file position."""

    def __init__(self, index: VideoIndex, stats: ExtractStats, *, verify: bool = True) -> None:
        self._index = index
        self._stats = stats
        self._verify = verify
        self._open()

    def _open(self) -> None:
        try:
            self.container = av.open(self._index.path, mode="r")
        except _AV_ERRORS as exc:
            raise VideoError(f"{self._index.path}: cannot reopen: {exc}") from exc
        self.stream = self.container.streams.video[0]
        _configure_decoder(self.stream)
        self.ctx = self.stream.codec_context
        self._demux = self.container.demux(self.stream)
        self.next_pos = 0
        self._held: Packet | None = None

    def close(self) -> None:
        self.container.close()

    def _raw_next(self) -> Packet | None:
        if self._held is not None:
            packet, self._held = self._held, None
            return packet
        try:
            for packet in self._demux:
                if packet.size == 0 or (
                    packet.pts is None and packet.dts is None and not self._index.synthetic_pts
                ):
                    continue
                return packet
        except _AV_ERRORS:
            return None  # damaged tail: the index stopped here too
        return None

    def _matches(self, pos: int, packet: Packet) -> bool:
        if pos >= len(self._index.pkt_size):
            return False
        if self._index.synthetic_pts:
            return packet.size == self._index.pkt_size[pos]
        return packet.pts == self._index.pkt_pts[pos] and packet.size == self._index.pkt_size[pos]

    def next_packet(self) -> tuple[int, Packet] | None:
        packet = self._raw_next()
        if packet is None:
            return None
        pos = self.next_pos
        if self._verify and not self._matches(pos, packet):
            raise _Desync(f"packet {pos} differs from the index")
        self.next_pos += 1
        self._stats.packets_demuxed += 1
        return pos, packet

    def seek_to_gop(self, gop: int) -> None:
        """Position the reader at or before the start of `gop` (decoder must be drained: PyAV's
        seek flushes it). Verifies the landing packet; restarts from the file start if the
        demuxer cannot land early enough."""
        index = self._index
        target = index.gop_starts[gop]
        for g in range(gop, max(gop - _SEEK_ATTEMPTS, -1), -1):
            ts = index.pkt_pts[index.gop_starts[g]]
            if ts is None:
                continue
            try:
                self.container.seek(ts, stream=self.stream, backward=True, any_frame=False)
            except _AV_ERRORS:
                break
            self._stats.seeks += 1
            self._demux = self.container.demux(self.stream)
            self._held = None
            packet = self._raw_next()
            landing = index.packet_of_pts(packet.pts) if packet and packet.pts is not None else None
            if landing is not None and landing <= target and self._matches(landing, packet):
                self.next_pos = landing
                self._held = packet
                return
        self._stats.restarts += 1
        self.close()
        self._open()


def _plan(index: VideoIndex, target_pos: Sequence[int], skip_nonref: bool) -> tuple[list[int], int]:
    """(packet positions to feed ascending, non-reference packets left out): per target, from
    its GOP's keyframe on every packet that may be referenced, plus the target itself."""
    need_until: dict[int, int] = {}
    for p in target_pos:
        g = index.gop_of(p)
        need_until[g] = max(need_until.get(g, -1), p)
        key = index.gop_starts[g]
        p_pts, key_pts = index.pkt_pts[p], index.pkt_pts[key]
        leading = p_pts is not None and key_pts is not None and p_pts < key_pts
        if g > 0 and leading and not index.pkt_idr[key]:
            # Leading picture of an open GOP: it may reference the previous GOP's last frames.
            need_until[g - 1] = index.gop_end(g - 1)
    targets = set(target_pos)
    skip = skip_nonref and index.nonref_skippable
    plan: list[int] = []
    skipped = 0
    for g in sorted(need_until):
        for pos in range(index.gop_starts[g], need_until[g] + 1):
            if not skip or pos in targets or index.pkt_ref[pos] is not False:
                plan.append(pos)
            else:
                skipped += 1
    return plan, skipped


def _decode_plan(
    index: VideoIndex,
    plan: Sequence[int],
    wanted: set[int],
    emit: Callable[[VideoFrame], None],
    stats: ExtractStats,
    *,
    verify: bool = True,
    stop_when_done: bool = True,
) -> None:
    """Feed the planned packets in one forward pass; `emit` gets every decoded frame whose pts
    is in `wanted` (the caller removes what it has). Seeks only over whole unneeded GOPs."""
    reader = _Reader(index, stats, verify=verify)

    def feed(packet: Packet | None) -> None:
        try:
            frames = reader.ctx.decode(packet)
        except _AV_ERRORS:
            stats.decode_errors += 1  # a full decode skips such packets too
            return
        for frame in frames:
            stats.frames_decoded += 1
            if frame.pts in wanted:
                emit(frame)

    def drain() -> None:
        feed(None)
        reader.ctx.flush_buffers()

    try:
        last_gop = -1
        for q in plan:
            if stop_when_done and not wanted:
                break
            gop = index.gop_of(q)
            if gop != last_gop:
                stats.gops_decoded += 1
                last_gop = gop
            # Seek only when at least one whole GOP lies between us and q: reading through the
            # rest of the current GOP is cheaper, and keeps open-GOP references intact.
            if index.seekable and gop >= index.gop_of(reader.next_pos) + 2:
                drain()
                reader.seek_to_gop(gop)
            while True:
                item = reader.next_packet()
                if item is None:
                    drain()
                    return  # EOF or damaged tail: missing targets are handled by the caller
                pos, packet = item
                if pos == q:
                    if index.synthetic_pts:
                        packet.pts = index.pkt_pts[pos]  # decoder passes pts through to frames
                    stats.packets_sent += 1
                    feed(packet)
                    break
                if pos > q:
                    raise _Desync(f"packet {q} was not found (at {pos})")
        drain()
    finally:
        reader.close()


def _resolve_requests(
    index: VideoIndex, times: Sequence[float] | None, indices: Sequence[int] | None
) -> list[tuple[int, float | None, int | None, int, bool]]:
    """(request_no, requested_s, requested_index, frame_index, clamped) per request."""
    out: list[tuple[int, float | None, int | None, int, bool]] = []
    for t in times or ():
        t = float(t)
        frame, clamped = index.frame_at_time(t)
        out.append((len(out), t, None, frame, clamped))
    last = index.frame_count - 1
    for i in indices or ():
        i = operator.index(i)
        frame = min(max(i, 0), last)  # negative indices clamp to 0: no Python wrap-around
        out.append((len(out), None, i, frame, frame != i))
    return out


def extract_frames(
    path: str | Path,
    *,
    times: Sequence[float] | None = None,
    indices: Sequence[int] | None = None,
    size: tuple[int, int] | None = None,
    index: VideoIndex | None = None,
    skip_nonref: bool = True,
    stats: ExtractStats | None = None,
) -> list[ExtractedFrame]:
    """Decode the frames shown at `times` (stream seconds) and/or at frame `indices`.

    Requests are numbered times first, then indices; results come back in that order, one per
    request (duplicates allowed). Out-of-range requests are clamped to the first/last frame and
    flagged. `size=(width, height)` resizes with libswscale bicubic. Pixels equal those of the
    same frame in `full_decode_rgb(path, size)`. Pass `index` to reuse a demux pass and `stats`
    to receive counters.
    """
    if times is None and indices is None:
        raise ValueError("pass times and/or indices")
    if size is not None:
        width, height = (operator.index(v) for v in size)
        if width <= 0 or height <= 0:
            raise ValueError(f"size must be positive (width, height), got {size!r}")
        size = (width, height)
    spath = str(path)
    if index is None:
        index = index_video(spath)
    elif Path(index.path).resolve() != Path(spath).resolve():
        raise ValueError(f"index is for {index.path}, not {spath}")
    stats = stats if stats is not None else ExtractStats()

    requests = _resolve_requests(index, times, indices)
    targets: dict[int, _Target] = {}
    for no, t, i, frame, clamped in requests:
        pts = index.pts[frame]
        target = targets.setdefault(pts, _Target(pts, frame, []))
        target.requests.append((no, t, i, clamped))
    stats.targets = len(targets)
    results: list[ExtractedFrame | None] = [None] * len(requests)

    def deliver(target: _Target, frame: VideoFrame, *, decoded_pts: int, exact: bool) -> None:
        rgb = _to_rgb(frame, size)
        stats.frames_converted += 1
        frame_index = index.frame_of_pts(decoded_pts)
        assert frame_index is not None
        for n, (no, t, i, clamped) in enumerate(target.requests):
            results[no] = ExtractedFrame(
                request_no=no,
                requested_s=t,
                requested_index=i,
                used_s=index.time_of(frame_index),
                pts=decoded_pts,
                frame_index=frame_index,
                clamped=clamped or not exact,
                width=rgb.shape[1],
                height=rgb.shape[0],
                rgb=rgb if n == 0 else rgb.copy(),  # callers may modify results independently
            )

    wanted = set(targets)

    def emit(frame: VideoFrame) -> None:
        wanted.discard(frame.pts)
        deliver(targets[frame.pts], frame, decoded_pts=frame.pts, exact=True)

    target_pos = sorted(index.frame_pkt[t.frame_index] for t in targets.values())
    plan, stats.nonref_skipped = _plan(index, target_pos, skip_nonref)
    stats.packets_planned = len(plan)
    try:
        _decode_plan(index, plan, wanted, emit, stats)
    except _Desync:
        # The file does not match the index: decode everything, recognise frames by pts.
        stats.restarts += 1
        _decode_plan(index, range(len(index.pkt_pts)), wanted, emit, stats, verify=False)
    if wanted:
        _fallback(index, [targets[p] for p in sorted(wanted)], deliver, stats)
    return [r for r in results if r is not None]


def _fallback(
    index: VideoIndex,
    missing: list[_Target],
    deliver: Callable[..., None],
    stats: ExtractStats,
) -> None:
    """Targets that did not come out of the planned decode: decode their neighbourhood without
    shortcuts; keep the target if it decodes, else the last earlier frame that does (or, with
    nothing decodable before it, the first one after)."""
    last_gop = len(index.gop_starts) - 1
    for target in missing:
        gop = index.gop_of(index.frame_pkt[target.frame_index])
        lo, hi = max(gop - 1, 0), min(gop + 1, last_gop)
        while True:
            le, gt = _scan_range(index, lo, hi, target.pts, stats)
            if le is not None:
                break
            if lo > 0:
                lo = max(lo - 4, 0)  # widen backwards: earlier GOPs may still decode
            elif hi < last_gop:
                hi = last_gop  # nothing decodes before it: look for the first frame after
            else:
                break
        chosen = le or gt
        if chosen is None:
            raise VideoError(f"{index.path}: no decodable video frames")
        deliver(target, chosen[1], decoded_pts=chosen[0], exact=chosen[0] == target.pts)


def _scan_range(
    index: VideoIndex, lo: int, hi: int, pts: int, stats: ExtractStats
) -> tuple[tuple[int, VideoFrame] | None, tuple[int, VideoFrame] | None]:
    """Decode GOPs lo..hi fully; return the decoded frames (pts, frame) nearest to `pts` from
    below (inclusive) and from above. Holds at most two decoded frames."""
    best: list[tuple[int, VideoFrame] | None] = [None, None]

    def keep(frame: VideoFrame) -> None:
        if index.frame_of_pts(frame.pts) is None:
            return
        le, gt = best
        if frame.pts <= pts:
            if le is None or frame.pts > le[0]:
                best[0] = (frame.pts, frame)
        elif gt is None or frame.pts < gt[0]:
            best[1] = (frame.pts, frame)

    plan = range(index.gop_starts[lo], index.gop_end(hi) + 1)
    stats.fallback_passes += 1
    try:
        _decode_plan(index, plan, _AllPts(), keep, stats, stop_when_done=False)
    except _Desync:
        _decode_plan(index, plan, _AllPts(), keep, stats, verify=False, stop_when_done=False)
    return best[0], best[1]


class _AllPts(set):  # type: ignore[type-arg]
    """A `wanted` set that contains every pts and is never empty (fallback passes)."""

    def __contains__(self, item: object) -> bool:
        return item is not None

    def __bool__(self) -> bool:
        return True


# --------------------------------------------------------------------------------------------
# Reference decode and JPEG
# --------------------------------------------------------------------------------------------


def iter_decoded_rgb(
    path: str | Path, size: tuple[int, int] | None = None
) -> Iterator[tuple[int | None, np.ndarray]]:
    """(pts, rgb) of every frame of a plain sequential single-threaded decode, in output order.
    Packets the decoder rejects are skipped; a demux error ends the stream."""
    with av.open(str(path), mode="r") as container:
        stream = container.streams.video[0]
        _configure_decoder(stream)
        packets = container.demux(stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                break
            except _AV_ERRORS:
                packet = None  # damaged tail: drain what the decoder holds, then stop
            try:
                frames = stream.codec_context.decode(packet)
            except _AV_ERRORS:
                frames = []
            for frame in frames:
                yield frame.pts, _to_rgb(frame, size)
            if packet is None:
                break


def full_decode_rgb(path: str | Path, size: tuple[int, int] | None = None) -> list[np.ndarray]:
    """Every frame of a plain sequential decode (reference for tests; memory grows with length)."""
    return [rgb for _, rgb in iter_decoded_rgb(path, size)]


def encode_jpeg(rgb: np.ndarray, quality: int = 90) -> bytes:
    """Baseline JPEG of an HxWx3 uint8 image; same input and Pillow build give the same bytes."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"expected HxWx3 uint8, got {rgb.shape} {rgb.dtype}")
    buf = BytesIO()
    # No EXIF/ICC or timestamps are written; optimize=False keeps the default Huffman tables.
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
