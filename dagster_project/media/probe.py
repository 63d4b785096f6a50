"""Cheap video integrity probe with PyAV: one demux pass plus two tiny decodes.

A full decode of every benchmark video is too slow for ingestion, but container metadata alone
lies (missing/zero frame counts, durations that include trailing audio or edit lists, truncated
files). So the probe demuxes every packet (fast: no decoding) to count frames and find the
timestamp range, then decodes only the first frame and the last GOP to prove both ends play.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import islice
from pathlib import Path

import av
import av.error
import av.logging
from av.container import InputContainer
from av.packet import Packet
from av.video.stream import VideoStream

from dagster_project.filecache import remembered

# Errors PyAV/FFmpeg raise for unreadable or corrupt input (FFmpegError subclasses OSError in
# some PyAV versions, so list both). ValueError covers odd timestamp/codec edge cases.
_AV_ERRORS: tuple[type[BaseException], ...] = (av.error.FFmpegError, OSError, ValueError)

# Codecs of still images: a file of one of these is a picture, whatever its name says (a PNG
# renamed to gt.mp4 opens in FFmpeg as a one-frame "video" of codec png).
STILL_IMAGE_CODECS = frozenset({
    "png", "apng", "mjpeg", "jpegls", "jpeg2000", "jpegxl", "bmp", "gif", "tiff", "webp",
    "ppm", "pgm", "pgmyuv", "pbm", "pam", "qoi", "exr", "dpx", "sgi", "targa", "xbm", "xpm",
    "pcx", "sunrast", "hdr", "photocd", "pictor", "psd", "ptx", "vbn", "xwd", "txd",
})

# Signatures of files that are certainly no video, checked before FFmpeg opens a file: FFmpeg
# would read a PNG as a one-frame "video", call a text file "moov atom not found", and follow the
# references of a text playlist (HLS, concat) to other files.
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "PNG image"),
    (b"\xff\xd8\xff", 0, "JPEG image"),
    (b"GIF87a", 0, "GIF image"),
    (b"GIF89a", 0, "GIF image"),
    (b"WEBP", 8, "WebP image"),
    (b"II*\x00", 0, "TIFF image"),
    (b"MM\x00*", 0, "TIFF image"),
    (b"%PDF-", 0, "PDF document"),
    (b"PK\x03\x04", 0, "ZIP archive"),
    (b"\x1f\x8b", 0, "gzip archive"),
)
_SNIFF_BYTES = 512
_TEXT_SHOWN = 40


def sniff(head: bytes) -> str | None:
    """What a file whose first bytes are `head` is, when that is certainly not a video ("PNG
    image", "text file (starts 'hello')"); None for anything else, which FFmpeg then judges (so a
    damaged real video keeps FFmpeg's own reason)."""
    for magic, offset, what in _MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return what
    text = head.removeprefix(b"\xef\xbb\xbf")
    decoded = None
    # A file longer than `head` may have a multi-byte character cut at its end: still text.
    for cut in range(4 if len(head) == _SNIFF_BYTES else 1):
        try:
            decoded = text[:len(text) - cut].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    if decoded and all(c.isprintable() or c in "\t\n\r\f" for c in decoded):
        shown = decoded.strip()[:_TEXT_SHOWN]
        more = "…" if len(decoded.strip()) > _TEXT_SHOWN else ""
        return f"text file (starts {shown!r}{more})" if shown else "text file (blank)"
    return None


# How many trailing keyframes to try when the last GOP does not decode at all.
_MAX_TAIL_GOPS = 3

# Give up looking for the first frame after this many packets (a broken first GOP would
# otherwise turn the probe into a full decode).
_MAX_FIRST_PACKETS = 1000

_LogList = list[tuple[int, str, str]]


@dataclass(frozen=True)
class VideoProbe:
    """Result of `probe_video`; use `dataclasses.asdict` to get a plain dict."""

    path: str
    ok: bool  # a moving picture (see `_not_a_video`), first and last frames decode, complete
    error: str | None  # reason naming what failed; None iff ok
    codec: str | None
    width: int | None
    height: int | None
    fps: float | None  # average frame rate
    metadata_duration_s: float | None  # stream.duration*time_base, else container duration
    frame_count: int | None  # video packets with a timestamp, counted in a demux pass
    first_frame_s: float | None  # pts*time_base of the first decoded frame (not start-shifted)
    last_frame_s: float | None  # pts*time_base of the last decodable frame
    first_frame_decodes: bool
    last_frame_decodes: bool
    size_bytes: int


def _failed(path: str, size: int, error: str) -> VideoProbe:
    return VideoProbe(
        path=path,
        ok=False,
        error=error,
        codec=None,
        width=None,
        height=None,
        fps=None,
        metadata_duration_s=None,
        frame_count=None,
        first_frame_s=None,
        last_frame_s=None,
        first_frame_decodes=False,
        last_frame_decodes=False,
        size_bytes=size,
    )


@contextmanager
def _capture_libav_logs() -> Iterator[_LogList]:
    """Collect FFmpeg's own error messages (e.g. "moov atom not found") for this thread.

    PyAV silences libav logging by default, which leaves exceptions with generic texts such as
    "Invalid data found when processing input". We enable ERROR level only while probing and
    route it into a thread-local capture so nothing leaks into Python logging from this thread.
    """
    previous = av.logging.get_level()
    previous_skip = av.logging.get_skip_repeated()
    if previous is None:
        av.logging.set_level(av.logging.ERROR)
    # PyAV drops a message identical to the previous one, so probing two files with the same
    # defect would lose the reason for the second.
    av.logging.set_skip_repeated(False)
    try:
        with av.logging.Capture(local=True) as logs:
            yield logs
    finally:
        av.logging.set_skip_repeated(previous_skip)
        if previous is None:
            av.logging.set_level(None)


def _reason(exc: BaseException, logs: _LogList, since: int) -> str:
    """Human-readable failure reason, preferring FFmpeg's log text over the errno text."""
    messages = [m.strip() for lvl, _, m in logs[since:] if lvl <= av.logging.ERROR and m.strip()]
    if messages:
        return messages[-1].rstrip(".")
    strerror = getattr(exc, "strerror", None)
    return str(strerror) if strerror else f"{type(exc).__name__}: {exc}"


def _configure_decoder(stream: VideoStream) -> None:
    # Single-threaded decoding: frame threading adds latency (more packets before the first
    # frame comes out) and its workers' log lines would escape our thread-local capture.
    stream.codec_context.thread_type = "NONE"
    stream.codec_context.thread_count = 1


def _seconds(ts: int | None, time_base: Fraction | None) -> float | None:
    if ts is None or time_base is None:
        return None
    return float(ts * time_base)


# Bump when probe_video's result for the same bytes changes: cached probes are then redone.
PROBE_VERSION = "2"


def probe_video_cached(path: str | Path, file_cache: Path | None) -> VideoProbe:
    """`probe_video`, remembered per file identity in `file_cache` (`filecache`): a file that
    did not change is not read again."""
    return remembered(Path(path), file_cache, "probes", PROBE_VERSION, probe_video,
                      dataclasses.asdict, lambda d: VideoProbe(**d))


def decoded_image_size(path: Path, file_cache: Path | None) -> tuple[int, int]:
    """(width, height) of an image fully decoded (not just `verify`, which misses truncated JPEG
    data), remembered per file identity in `file_cache`: an unchanged image is not decoded again.
    Raises what Pillow raises for an image that does not decode (that is not remembered)."""
    def decode(p: Path) -> tuple[int, int]:
        from PIL import Image

        with Image.open(p) as im:
            im.load()
            return im.size

    return remembered(path, file_cache, "image_sizes", "1", decode, list, tuple)


def probe_video(path: str | Path) -> VideoProbe:
    """Probe a video file without fully decoding it. Never raises; failures give ok=False.

    Cost: reading all packets once plus decoding the first frame and the last GOP. Damage in
    the middle of the stream (outside those GOPs) is not detected. Safe to call from several
    threads; at worst a concurrent probe loses FFmpeg's detailed message text.
    """
    spath = str(path)
    try:
        size = Path(path).stat().st_size
    except FileNotFoundError:
        return _failed(spath, 0, "cannot open: file not found")
    except OSError as exc:
        return _failed(spath, 0, f"cannot open: {exc.strerror or exc}")
    if size == 0:
        return _failed(spath, 0, "not a video: empty file (0 bytes)")
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        return _failed(spath, size, f"cannot open: {exc.strerror or exc}")
    what = sniff(head)
    if what is not None:
        return _failed(spath, size, f"not a video: {what}")
    with _capture_libav_logs() as logs:
        try:
            return _probe(spath, size, logs)
        except Exception as exc:  # the contract is "never raises": report, don't propagate
            return _failed(spath, size, f"unexpected {type(exc).__name__}: {exc}")


def _probe(path: str, size: int, logs: _LogList) -> VideoProbe:
    mark = len(logs)
    try:
        container = av.open(path, mode="r")
    except _AV_ERRORS as exc:
        return _failed(path, size, f"cannot open: {_reason(exc, logs, mark)}")
    with container:
        if not container.streams.video:
            return _failed(path, size, "no video stream")
        stream = container.streams.video[0]
        time_base = stream.time_base
        codec_ctx = stream.codec_context
        rate = stream.average_rate or stream.guessed_rate
        if stream.duration and time_base is not None:
            meta_duration: float | None = float(stream.duration * time_base)
        elif container.duration:
            meta_duration = container.duration / 1_000_000  # AV_TIME_BASE units
        else:
            meta_duration = None
        base = VideoProbe(
            path=path,
            ok=False,
            error=None,
            codec=codec_ctx.name if codec_ctx is not None else None,
            width=stream.width or None,
            height=stream.height or None,
            fps=float(rate) if rate else None,
            metadata_duration_s=meta_duration,
            frame_count=None,
            first_frame_s=None,
            last_frame_s=None,
            first_frame_decodes=False,
            last_frame_decodes=False,
            size_bytes=size,
        )
        if codec_ctx is None:
            return replace(base, error="no decoder for the video codec in this FFmpeg build")
        meta_frames = stream.frames  # 0 when the container does not say

        # --- demux pass: timestamps and keyframes, no decoding ---
        errors: list[str] = []
        timestamps: list[int] = []
        # Seek targets in file order. The keyframe's pts is right for pts-indexed formats (mp4
        # lands exactly on it) and still safe for dts-indexed ones (its dts <= its pts).
        keyframes: list[int] = []
        n_packets = 0  # including edit-list-discarded ones, to compare with metadata
        n_corrupt = 0
        mark = len(logs)
        try:
            for packet in container.demux(stream):
                ts = packet.pts if packet.pts is not None else packet.dts
                if ts is None:
                    continue  # the empty flush packet PyAV yields at EOF
                n_packets += 1
                n_corrupt += packet.is_corrupt
                if packet.is_discard:
                    continue  # trimmed by an edit list: never presented, decoder drops it
                timestamps.append(ts)
                if packet.is_keyframe:
                    keyframes.append(ts)
        except _AV_ERRORS as exc:
            errors.append(f"demux failed after {n_packets} packets: {_reason(exc, logs, mark)}")
        truncated = bool(meta_frames and n_packets < meta_frames)
        if truncated:
            errors.append(f"truncated: {n_packets} of {meta_frames} frames present in file")
        elif n_corrupt:
            errors.append(f"{n_corrupt} packet(s) flagged corrupt (truncated data?)")
        if not timestamps:
            errors.append("no video packets")
            return replace(base, frame_count=0, error="; ".join(errors))
        still = _not_a_video(container.format.name, base.codec, len(timestamps), meta_duration)
        if still is not None:
            return replace(base, frame_count=len(timestamps), error=f"not a video: {still}")
        max_ts = max(timestamps)
        if base.fps is None and len(timestamps) > 1 and time_base is not None:
            # No rate in the metadata: derive an average from the timestamp span.
            span = float((max_ts - min(timestamps)) * time_base)
            base = replace(base, fps=(len(timestamps) - 1) / span if span > 0 else None)

    # --- decodes on a fresh container (clean demuxer state, no seek-to-start needed) ---
    mark = len(logs)
    try:
        container = av.open(path, mode="r")
    except _AV_ERRORS as exc:
        errors.append(f"cannot reopen: {_reason(exc, logs, mark)}")
        return replace(base, frame_count=len(timestamps), error="; ".join(errors))
    with container:
        stream = container.streams.video[0]
        _configure_decoder(stream)
        first_pts, first_err = _decode_first(container, stream, logs)
        if first_err:
            errors.append(first_err)
        last_pts, last_err = _decode_last(container, stream, keyframes, logs)
        if last_err:
            errors.append(last_err)

    # Both ends are judged against the packet timestamps, not just "some frame came out": a
    # frame lost at either end shrinks the decodable range, which first/last_frame_s report.
    first_ok = first_pts is not None and first_pts <= min(timestamps)
    # A truncated file's real last frame is missing even if the last *present* one decodes.
    last_ok = last_pts is not None and last_pts >= max_ts and not truncated
    if not first_ok and not first_err:
        errors.append("first frame does not decode")
        if first_pts is not None:
            errors[-1] += f" (decodable from {_seconds(first_pts, time_base):.3f}s)"
    if not last_ok and not last_err:
        if last_pts is None:
            errors.append("last frame does not decode")
        else:
            errors.append(
                f"last frame does not decode (decodable up to "
                f"{_seconds(last_pts, time_base):.3f}s of {_seconds(max_ts, time_base):.3f}s)"
            )
    ok = first_ok and last_ok and not errors
    return replace(
        base,
        ok=ok,
        error=None if ok else "; ".join(errors),
        frame_count=len(timestamps),
        first_frame_s=_seconds(first_pts, time_base),
        last_frame_s=_seconds(last_pts, time_base),
        first_frame_decodes=first_ok,
        last_frame_decodes=last_ok,
    )


def _not_a_video(format_name: str, codec: str | None, frames: int,
                 duration: float | None) -> str | None:
    """Why a file that opened is still no video (None: it is one): an image container or
    codec, fewer than two frames, or no duration. Evidence needs a moving picture: two frames
    at least (the first and the last decode, and anchors and panels can differ)."""
    if format_name in ("image2", "image2pipe") or format_name.endswith("_pipe"):
        return f"an image file (FFmpeg reads it with the {format_name} demuxer)"
    if codec in STILL_IMAGE_CODECS:
        return f"the stream is {codec} pictures, not a video codec"
    if frames < 2:
        return f"{frames} frame only"
    if duration is None or duration <= 0:
        return "no duration in the file"
    return None


def _decode_packets(
    packets: Iterable[Packet], logs: _LogList, *, stop_at_first: bool
) -> tuple[list[int], list[str]]:
    """Decode packets, skipping ones the decoder rejects; return (frame pts, failure reasons).

    Skipping (rather than stopping at) a bad packet mirrors what players do, so frames after
    damage still count as decodable. A demux error ends the pass but keeps what was decoded.
    """
    pts_out: list[int] = []
    failures: list[str] = []
    iterator = iter(packets)
    while True:
        mark = len(logs)
        try:
            packet = next(iterator)
        except StopIteration:
            break
        except _AV_ERRORS as exc:
            failures.append(f"read error: {_reason(exc, logs, mark)}")
            break
        try:
            frames = packet.decode()  # the final empty packet drains the decoder
        except _AV_ERRORS as exc:
            failures.append(_reason(exc, logs, mark))
            continue
        pts_out.extend(frame.pts for frame in frames if frame.pts is not None)
        if stop_at_first and pts_out:
            break
    return pts_out, failures


def _decode_first(
    container: InputContainer, stream: VideoStream, logs: _LogList
) -> tuple[int | None, str | None]:
    """Decode from the start until one frame comes out; return (its pts, error)."""
    packets = islice(container.demux(stream), _MAX_FIRST_PACKETS)
    pts_out, failures = _decode_packets(packets, logs, stop_at_first=True)
    first = pts_out[0] if pts_out else None
    if failures:
        return first, f"decode errors at the start: {_summarize(failures)}"
    return first, None


def _decode_last(
    container: InputContainer, stream: VideoStream, keyframes: list[int], logs: _LogList
) -> tuple[int | None, str | None]:
    """Seek to the last keyframe, decode to EOF and return (max decoded pts, error).

    The max over *decoded* frames is used because B-frame reordering means the last packet in
    file order is not the last frame in display order. If the last GOP yields nothing, earlier
    keyframes are tried so last_frame_s still marks the end of the decodable range.
    """
    targets = list(dict.fromkeys(reversed(keyframes)))[:_MAX_TAIL_GOPS] or [None]
    error: str | None = None
    for target in targets:
        mark = len(logs)
        pts_out: list[int] = []
        try:
            if target is None:
                container.seek(0)  # no keyframe flags at all: decode everything from the start
            else:
                container.seek(target, stream=stream, backward=True, any_frame=False)
            pts_out, failures = _decode_packets(container.demux(stream), logs, stop_at_first=False)
        except _AV_ERRORS as exc:
            failures = [f"seek failed: {_reason(exc, logs, mark)}"]
        if failures and error is None:
            error = f"decode errors in the last GOP: {_summarize(failures)}"
        if pts_out:
            return max(pts_out), error
    return None, error


def _summarize(failures: list[str]) -> str:
    more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
    return f"{failures[0]}{more}"
