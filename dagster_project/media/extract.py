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

import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
from av.packet import Packet
from av.video.frame import VideoFrame
from av.video.stream import VideoStream

from dagster_project.media.packet_index import _AV_ERRORS, VideoError, VideoIndex, index_video

# Seek targets to try (the GOP itself, then earlier ones) before restarting from the file start:
# demuxers that seek by DTS or bytes (MPEG-TS) can land a GOP late.
_SEEK_ATTEMPTS = 3


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
# Reference decode
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
