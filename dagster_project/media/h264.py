"""Reading H.264 bitstreams just far enough to index them: NAL unit headers (`nal_ref_idc`, IDR,
parameter sets, recovery-point SEI), SPS, PPS and the slice header prefix that orders the pictures
of raw streams by picture order count. Nothing is decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# H.264 NAL unit types (ITU-T H.264 table 7-1).
_NAL_SLICE, _NAL_IDR, _NAL_SEI, _NAL_SPS, _NAL_PPS, _NAL_AUD, _NAL_FILLER = 1, 5, 6, 7, 8, 9, 12
# NAL types that may ride along in a packet we drop (they change no decoder state we rely on).
_DROPPABLE_EXTRA = frozenset({_NAL_SEI, _NAL_AUD, _NAL_FILLER})
_SEI_RECOVERY_POINT = 6
_HIGH_PROFILES = frozenset({100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135})


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
