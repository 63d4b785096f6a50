"""The records of one file version of a drop folder (JUDGMENTS_DIR, RESPONSES_DIR), streamed:
JSON Lines (also a block of lines at a time, for readers that decode many records at once), JSON
(one object, or an array of them) and Parquet; every problem a record of its own, with its line.
`dropfolder.py` archives the versions these read.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from dagster_project.dropfolder import CHUNK, file_sha256

# --- reading the records of one file version ------------------------------------------------
#
# One reader for every drop folder (judgments and responses): JSON Lines, JSON (one object, or an
# array of them) and Parquet, streamed, so a file of any size is read in bounded memory. Limits
# are per record: a record over `max_record_bytes` is one problem with its line, never a whole
# file refused. The JSON is read strictly: UTF-8, a key at most once per object, no NaN or
# Infinity (Python's json would keep the last of repeated keys and accept NaN, silently altering
# what was written), lines split on "\n" only (str.splitlines would also split inside strings
# on U+2028 and friends).


@dataclass(frozen=True)
class Record:
    """One record of a file, or one problem. `line`: the 1-based line of a .jsonl file, the
    1-based index in a .json array or a Parquet file, 1 for a .json object; None for a problem
    of the whole file. `value` is the parsed object when `problem` is None."""

    line: int | None
    raw: str | None
    value: Any = None
    problem: str | None = None
    # orjson's text of `value` with sorted keys, when it read the record (else None): what a
    # reader digesting the value's canonical JSON would write again (`canonical_json`)
    sorted_text: bytes | None = None


class _Ambiguous(ValueError):
    """Valid JSON syntax that would have to be altered to be stored (repeated keys, NaN)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)  # in C; a key given twice leaves fewer entries than pairs
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Ambiguous(f"key {json.dumps(key)} appears twice in one object")
            seen.add(key)
    return obj


def _no_constant(name: str) -> Any:
    raise _Ambiguous(f"{name} is not a JSON value")


_OUTSIDE = re.compile(r'["\[\]{},]')
_IN_STRING = re.compile(r'["\\]')
STRICT_JSON = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_no_constant)
_BOM = b"\xef\xbb\xbf"


# orjson reads a record ~5x faster than `STRICT_JSON` and refuses what it refuses (NaN,
# Infinity, invalid text), but keeps the last of repeated keys and makes an integer over 64 bits
# a float. So it is used only where it provably reads the same value: no run of 19 digits (an
# integer that might not fit) and no `\u` escape in the text; then every colon of the text is a
# key's or a literal one inside a string, as in orjson's own text of the value, and a repeated
# key (dropped, with its colon) leaves fewer. Anything else is read by `STRICT_JSON`, which says
# what is wrong.
ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")  # every digit a 0 (one C pass)
_LONG_NUMBER = b"0" * 19


def _decode(text: str, line: int, what: str = "", data: bytes | None = None) -> Record:
    """The record of `text` (`data`: its UTF-8 bytes, when the caller has them)."""
    data = text.encode() if data is None else data
    if b"\\u" not in data and _LONG_NUMBER not in data.translate(ZERO_DIGITS):
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:  # ":" is one byte in UTF-8, and no byte of another character
            written = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            if written.count(b":") == data.count(b":"):
                return Record(line, text, value, sorted_text=written)
    try:
        return Record(line, text, STRICT_JSON.decode(text))
    except json.JSONDecodeError as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if what else f" at column {exc.colno}"
        return Record(line, text, problem=f"not JSON: {exc.msg}{where}")
    except _Ambiguous as exc:
        return Record(line, text, problem=f"ambiguous JSON: {exc}")


def _too_big(size: int, limit: int) -> str:
    return (f"record is {size} bytes, over the limit of {limit} bytes per record "
            "(the raw text kept here is its start; the whole file version is archived)")


def _jsonl(path: Path, limit: int) -> Iterator[Record]:
    found = False
    with path.open("rb") as fh:
        head = fh.read(len(_BOM))
        if head != _BOM:  # a BOM is an editor artefact, not part of the first record
            fh.seek(0)
        line_no = 0
        while True:
            chunk = fh.readline(limit + 2)
            if not chunk:
                break
            line_no += 1
            if not chunk.endswith(b"\n") and len(chunk) >= limit + 2:
                size, head = len(chunk), chunk[:limit]
                while not chunk.endswith(b"\n"):  # skip the rest of the line, in pieces
                    chunk = fh.readline(CHUNK)
                    if not chunk:
                        break
                    size += len(chunk)
                found = True
                yield _long_line(line_no, head, size, limit)
                continue
            rec = jsonl_record(chunk.removesuffix(b"\n"), line_no, limit)
            if rec is not None:
                found = True
                yield rec
    if not found:
        yield Record(None, None, problem=NO_RECORDS)


NO_RECORDS = "file holds no records (no non-blank line)"


def _long_line(line: int, head: bytes, size: int, limit: int) -> Record:
    """A line of `size` bytes (its "\n" included) of which only `head` was read."""
    return Record(line, head.decode("utf-8", "replace"), problem=_too_big(size, limit))


def jsonl_record(line: bytes, line_no: int, limit: int) -> Record | None:
    """The record (or problem) of one line of a .jsonl file shorter than `limit` + 2 bytes,
    given without its "\n"; None for a blank line."""
    body = line.removesuffix(b"\r")
    if not body.strip(b" \t\r"):
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Record(line_no, body.decode("utf-8", "backslashreplace"),
                      problem=f"not UTF-8: {exc}")
    if len(body) > limit:
        return Record(line_no, text[:limit], problem=_too_big(len(body), limit))
    return _decode(text, line_no, data=body)


def jsonl_blocks(path: Path, limit: int, block_bytes: int = 4 * CHUNK
                 ) -> Iterator[tuple[int, list[bytes | Record]]]:
    """The lines of a .jsonl file as `read_records` reads them, for a reader that takes a block
    of lines at once: (the number of the block's first line, its lines), each line its bytes
    without the "\n" (`jsonl_record` makes it the record `read_records` yields), or, when it is
    `limit` + 2 bytes or more, its problem, read in pieces. Memory: about two blocks, and what
    decoding them takes: a parsing process peaked at 390 MB with blocks of 16 MB and at 290 MB
    with 4 MB, no slower (two of them parse a campaign's files beside the run's process)."""
    with path.open("rb") as fh:
        if fh.read(len(_BOM)) != _BOM:  # a BOM is an editor artefact, not part of the data
            fh.seek(0)
        line_no, rest = 1, b""
        while True:
            block = fh.read(block_bytes)
            lines: list[bytes | Record] = (rest + block).split(b"\n")
            # What follows the last "\n": the start of a line, or at the end of the file the
            # last line (no "\n" to count in its size), if any.
            rest = lines.pop() if block or not lines[-1] else b""
            for i, line in enumerate(lines):
                if len(line) >= limit + 2:
                    newline = 1 if block or i < len(lines) - 1 else 0
                    lines[i] = _long_line(line_no + i, line[:limit], len(line) + newline, limit)
            if len(rest) >= limit + 2:  # over the limit already: skip to its end
                head, size, rest = rest[:limit], len(rest), b""
                while block := fh.read(block_bytes):
                    end = block.find(b"\n")
                    if end >= 0:
                        size, rest = size + end + 1, block[end + 1:]
                        break
                    size += len(block)
                lines.append(_long_line(line_no + len(lines), head, size, limit))
            if lines:
                yield line_no, lines
                line_no += len(lines)
            if not block and not rest:
                return


class _Text:
    """A UTF-8 file as a sliding text window: `buf[pos:]` is what is not consumed yet."""

    def __init__(self, fh: Any) -> None:
        if fh.read(len(_BOM)) != _BOM:  # a BOM is an editor artefact, not part of the data
            fh.seek(0)
        self.reader = codecs.getreader("utf-8")(fh)
        self.buf, self.pos = "", 0

    def fill(self) -> bool:
        data = self.reader.read(CHUNK)
        if not data:
            return False
        self.buf, self.pos = self.buf[self.pos:] + data, 0
        return True

    def ahead(self, n: int) -> None:
        """At least `n` characters after `pos`, unless the file ends first."""
        while len(self.buf) - self.pos < n and self.fill():
            pass

    def peek(self) -> str | None:
        """The next non-whitespace character (None at the end of the file)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\n\r":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return None

    def skip_value(self, limit: int) -> tuple[str, int, bool]:
        """Skip one array element that could not be parsed, up to the "," or "]" that ends it,
        tracking strings and nesting: (its start, up to `limit` chars; its length; whether the
        file ended first). Only this slow path looks at every character."""
        head, total, depth, in_str, esc, i = None, 0, 0, False, False, self.pos
        while True:
            if i >= len(self.buf):
                if head is None:
                    head = self.buf[self.pos:self.pos + limit] if i - self.pos > limit else None
                scanned = i - self.pos
                if head is not None:
                    total += scanned
                    self.buf, self.pos, scanned = "", 0, 0
                if not self.fill():
                    return (head or self.buf[self.pos:])[:limit], total + scanned, True
                i = self.pos + scanned
                continue
            if esc:
                esc, i = False, i + 1
                continue
            found = (_IN_STRING if in_str else _OUTSIDE).search(self.buf, i)
            if found is None:
                i = len(self.buf)
                continue
            i = found.start()
            ch = self.buf[i]
            if in_str:
                esc, in_str = (True, True) if ch == "\\" else (False, False)
            elif ch == '"':
                in_str = True
            elif ch in "[{":
                depth += 1
            elif ch in "]}" and depth > 0:
                depth -= 1
            elif ch in "]}," and depth == 0:
                raw = self.buf[self.pos:i].rstrip(" \t\n\r")
                self.pos = i
                return (head or raw)[:limit], total + len(raw), False
            i += 1


def _json(path: Path, limit: int) -> Iterator[Record]:
    """A .json file: one object (one record), or an array whose elements are the records, each
    parsed (strictly) on its own from a sliding window, so the file is never held whole."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        text = _Text(fh)
        try:
            first = text.peek()
            if first is None:
                yield Record(None, None, problem="file holds no records (it is empty)")
                return
            if first != "[":  # one object: the file is the record
                if size > limit:
                    text.ahead(limit)
                    yield Record(1, text.buf[text.pos:text.pos + limit],
                                 problem=_too_big(size, limit))
                    return
                while text.fill():
                    pass
                rec = _decode(text.buf[text.pos:].rstrip(" \t\n\r"), 1, "file")
                # unparseable, it is not a record yet: a problem of the file
                yield rec if rec.problem is None else Record(None, rec.raw, problem=rec.problem)
                return
            text.pos += 1
            if text.peek() == "]":
                yield Record(None, None, problem="file holds no records (an empty array)")
                return
            index = 0
            while True:
                index += 1
                if text.peek() is None:
                    yield Record(None, None, problem="not JSON: the array is not closed")
                    return
                text.ahead(limit + 1)
                start = text.pos
                try:
                    value, end = STRICT_JSON.raw_decode(text.buf, start)
                    raw = text.buf[start:end]
                    n_bytes = len(raw.encode("utf-8"))
                    text.pos = end
                    yield (Record(index, raw, value) if n_bytes <= limit else
                           Record(index, raw[:limit], problem=_too_big(n_bytes, limit)))
                except (json.JSONDecodeError, _Ambiguous) as exc:
                    raw, n_chars, ended = text.skip_value(limit)
                    if ended:
                        yield Record(index, raw, problem="not JSON: the file ends inside a "
                                     "record")
                        return
                    if n_chars > limit:
                        problem = _too_big(n_chars, limit)
                    elif isinstance(exc, _Ambiguous):
                        problem = f"ambiguous JSON: {exc}"
                    else:
                        problem = _decode(raw, index, "element").problem or f"not JSON: {exc}"
                    yield Record(index, raw, problem=problem)
                after = text.peek()
                if after == ",":
                    text.pos += 1
                elif after == "]":
                    text.pos += 1
                    if text.peek() is not None:
                        yield Record(None, None, problem="not JSON: text after the array")
                    return
                else:
                    yield Record(None, None, problem=f"not JSON: expected ',' or ']' after "
                                 f"record {index}")
                    return
        except UnicodeDecodeError as exc:
            yield Record(None, None, problem=f"not UTF-8: {exc}")


def _parquet(path: Path, limit: int) -> Iterator[Record]:
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - any reader error is the file's problem
        yield Record(None, None, problem=f"not a readable Parquet file: {exc}")
        return
    if pf.metadata.num_rows == 0:
        yield Record(None, None, problem="file holds no records (no rows)")
        return
    index = 0
    for batch in pf.iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            index += 1
            raw = json.dumps(row, default=str, ensure_ascii=False)
            if len(raw) > limit:
                yield Record(index, raw[:limit], problem=_too_big(len(raw), limit))
            else:
                yield Record(index, raw, row)


READERS = {".jsonl": _jsonl, ".json": _json, ".parquet": _parquet}


def read_records(path: Path, name: str, *, accept: tuple[str, ...], max_record_bytes: int,
                 sha256: str | None = None) -> Iterator[Record]:
    """Every record of the file version at `path` (named `name` in its drop folder), streamed.
    `accept`: the suffixes this drop folder takes. With `sha256`, the bytes are checked first
    against the digest recorded when the version was archived."""
    suffix = Path(name).suffix.lower()
    if suffix not in accept:
        yield Record(None, None, problem=f"unsupported file type {suffix or '(no extension)'!r}:"
                     f" expected {' or '.join('*' + s for s in accept)}")
        return
    try:
        if path.stat().st_size == 0:
            yield Record(None, None, problem="empty file: no records")
            return
        if sha256 is not None:
            digest = file_sha256(path)
            if digest != sha256.lower():
                # The archive copy must be the bytes that were recorded, or rows would lie.
                yield Record(None, None, problem=f"file content sha256 {digest} differs from "
                             f"the recorded {sha256}: the stored copy changed")
                return
        yield from READERS[suffix](path, max_record_bytes)
    except OSError as exc:
        yield Record(None, None, problem=f"cannot read file: {exc}")
