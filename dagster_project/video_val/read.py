"""Reading videorl-video-val parquets into flat question rows, with every refusal kept as a reject.

Nothing is dropped silently: each input row is either accepted (possibly with `noted` rejects
describing what was tolerated) or recorded as one `row_rejected` reject carrying the raw row.
Files that cannot be used at all give one `file_rejected` reject.

Validation is done in Python on `to_pylist()` values rather than on exact Arrow types, so files
written by other tools (integer `fps`, reordered struct fields, `large_string`) still load.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.roots import Root
from dagster_project.tables import raw_schema
from dagster_project.video_val.schema import EXTRA_INFO_FIELDS, VAL_SCHEMA

FILE_SCHEME = "file://"
VIDEO_PLACEHOLDER = "<video>"
VIDEO_SETTINGS: dict[str, type] = {
    "fps": float,
    "max_frames": int,
    "min_pixels": int,
    "max_pixels": int,
}
# Bytes larger than this are shown as "<n bytes>" in a reject's raw JSON: the rejects table is for
# reading, and an embedded image would swamp it. extra_columns always keeps the full value.
RAW_BYTES_LIMIT = 1024

# ----------------------------------------------------------------------------- path prefix map


def parse_prefix_map(text: str) -> list[tuple[str, str]]:
    """`"OLD=NEW; OLD2=NEW2"` → [(OLD, NEW), ...], longest OLD first so the most specific wins."""
    pairs: list[tuple[str, str]] = []
    for raw_item in text.split(";"):
        item = raw_item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ValueError(f"prefix map item {item!r} has no '=' (expected OLD=NEW)")
        old, new = (part.strip() for part in item.split("=", 1))
        if not old:
            raise ValueError(f"prefix map item {item!r} has an empty OLD prefix")
        pairs.append((old, new))
    # sorted() is stable, so equal-length prefixes keep the order the user gave.
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def file_uri_to_path(uri: str) -> str | None:
    """`file:///a/b%20c` → `/a/b c`; None for other schemes or a non-local host.

    Parsed by hand rather than with urlsplit: a `#` or `?` in a file name is part of the path.
    """
    if not uri.startswith(FILE_SCHEME):
        return None
    rest = uri[len(FILE_SCHEME):]
    host, slash, path = rest.partition("/")
    if not slash or host not in ("", "localhost"):
        return None
    return unquote("/" + path)


def _join_prefix(new: str, rest: str) -> str:
    """NEW + the unmatched tail, with exactly one "/" between them."""
    if not rest:
        return new
    return new.removesuffix("/") + "/" + rest.removeprefix("/")


def remap_uri(uri: str, prefix_map: list[tuple[str, str]]) -> tuple[str | None, bool]:
    """Apply the longest matching OLD prefix; return (local path of the result, matched?).

    OLD must end at a path boundary so `/cache` does not capture `/cache2/...`. A NEW given as a
    bare absolute path is treated as the file:// URI of that path.
    """
    if not uri.startswith(FILE_SCHEME):
        return None, False
    for old, new in sorted(prefix_map, key=lambda pair: len(pair[0]), reverse=True):
        if not uri.startswith(old):
            continue
        rest = uri[len(old):]
        if rest and not old.endswith("/") and not rest.startswith("/"):
            continue
        if new.startswith("/"):
            new = FILE_SCHEME + quote(new)
        return file_uri_to_path(_join_prefix(new, rest)), True
    return file_uri_to_path(uri), False


def video_roots(prefix_map: list[tuple[str, str]], explicit: str = "") -> list[Path]:
    """The folders val videos may be opened in: VIDEO_VAL_ROOTS (`;`-separated) when set, else
    the NEW sides of the prefix map. A path outside every root is never stat'ed or opened (a
    parquet row can name any file, /etc/passwd included)."""
    items = [p.strip() for p in explicit.split(";") if p.strip()] if explicit else [
        new for _, new in prefix_map]
    roots = []
    for item in items:
        local = file_uri_to_path(item) if item.startswith(FILE_SCHEME) else item
        if local and local.startswith("/"):
            roots.append(Path(os.path.normpath(local)))
    return roots


def inside_roots(path: str, roots: list[Path]) -> bool:
    """Whether `path` (absolute) lies inside one of `roots`, both as written (no `..` escapes)
    and after resolving symbolic links (a link inside a root may point anywhere): the rule of
    every root, `roots.Root`. Deciding never opens the file."""
    return any(Root(root, "VIDEO_VAL_ROOTS").inside(Path(path)) for root in roots)


# ----------------------------------------------------------------------------- user message

# `A. text`, `A) text` or `(A) text`; the marker style is kept so a run does not mix styles.
_OPTION = re.compile(
    r"^\s*(?:\((?P<paren>[A-Z])\)|(?P<letter>[A-Z])(?P<sep>[.)]))\s+(?P<text>\S.*)$"
)


@dataclass(frozen=True)
class ParsedQuestion:
    question: str
    options: list[tuple[str, str]]
    option_letters: str
    suffix: str


def _option(line: str) -> tuple[str, str, str] | None:
    """(letter, style, text) if the line looks like an option."""
    match = _OPTION.match(line)
    if not match:
        return None
    if match.group("paren"):
        return match.group("paren"), "()", match.group("text").strip()
    return match.group("letter"), match.group("sep"), match.group("text").strip()


def _option_runs(parsed: list[tuple[str, str, str] | None]) -> list[tuple[int, int]]:
    """[start, end) spans of consecutive option lines lettered A, B, C, ... (≥ 2 options)."""
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(parsed):
        first = parsed[i]
        if first is None or first[0] != "A":
            i += 1
            continue
        j = i + 1
        while j < len(parsed):
            nxt = parsed[j]
            if nxt is None or nxt[1] != first[1] or ord(nxt[0]) != ord("A") + (j - i):
                break
            j += 1
        if j - i >= 2:
            runs.append((i, j))
        # Line j may itself start a new "A" run (e.g. an example list before the real options).
        i = j
    return runs


def option_blocks(text: str) -> list[tuple[tuple[str, str], ...]]:
    """Every run of option lines (`A. ..`, `B. ..`, ...) in `text`, as (letter, text) pairs."""
    parsed = [_option(line) for line in text.replace("\r\n", "\n").split("\n")]
    return [tuple((o[0], o[2]) for o in parsed[a:b] if o is not None)
            for a, b in _option_runs(parsed)]


def parse_user_message(content: str) -> ParsedQuestion:
    """Split `<video>\\n<question>\\n<A. ..>\\n<B. ..>...\\n<instructions>` into its parts.

    The options are the last A, B, C, ... run, so a question that itself quotes an "A. ..." line
    keeps it in the question text.
    """
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = next((i for i, line in enumerate(lines)
                  if line.lstrip().startswith(VIDEO_PLACEHOLDER)), None)
    if start is None:
        raise ValueError(f"user message has no {VIDEO_PLACEHOLDER} placeholder")
    # Text on the placeholder's own line (`<video>How many...`) belongs to the question.
    first = lines[start].lstrip()[len(VIDEO_PLACEHOLDER):]
    body = [first, *lines[start + 1:]]
    parsed = [_option(line) for line in body]
    runs = _option_runs(parsed)
    if not runs:
        raise ValueError("user message has no option block (lines 'A. ...', 'B. ...' in order, "
                         "at least two)")
    opt_start, opt_end = runs[-1]
    question = "\n".join(body[:opt_start]).strip()
    if not question:
        raise ValueError("user message has no question text before the options")
    options = [(opt[0], opt[2]) for opt in parsed[opt_start:opt_end] if opt is not None]
    return ParsedQuestion(
        question=question,
        options=options,
        option_letters="".join(letter for letter, _ in options),
        suffix="\n".join(body[opt_end:]).strip(),
    )


# ----------------------------------------------------------------------------- JSON helpers


def _jsonable(value: Any, bytes_limit: int | None) -> Any:
    """Arrow's Python values → JSON-safe values (bytes as base64, or "<n bytes>" past a limit)."""
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if bytes_limit is not None and len(data) > bytes_limit:
            return f"<{len(data)} bytes>"
        return {"base64": base64.b64encode(data).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _jsonable(v, bytes_limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, bytes_limit) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN/inf are not valid JSON
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)  # dates, decimals, ...


def _to_json(value: Any, bytes_limit: int | None) -> str:
    return json.dumps(_jsonable(value, bytes_limit), ensure_ascii=False)


# ----------------------------------------------------------------------------- parquet reader


@dataclass
class ReadResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: str | None = None  # sha256 of the file bytes; None if the file can't be read
    n_rows: int = 0


def _reject(source_file: str, action: str, reason: str, row_index: int | None = None,
            uid: str | None = None, raw: str | None = None) -> dict[str, Any]:
    return {"source_file": source_file, "row_index": row_index, "uid": uid, "action": action,
            "reason": reason, "raw": raw}


def _text(value: Any) -> str | None:
    """Metadata as text: scalars written with another type (an int subject) still land."""
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _video_setting(value: Any, kind: type) -> Any:
    if value is None or isinstance(value, bool):
        return None
    try:
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _user_and_system(prompt: Any) -> tuple[str | None, str | None]:
    user: str | None = None
    system: str | None = None
    if isinstance(prompt, list):
        for message in prompt:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                continue
            if message.get("role") == "user" and user is None:
                user = message["content"]
            elif message.get("role") == "system" and system is None:
                system = message["content"]
    return user, system


def _check_row(raw: dict[str, Any], expected: str | None, source_file: str
               ) -> tuple[dict[str, Any], list[str], list[str]]:
    """Validate one row: (accepted-row fields, reject reasons, notes)."""
    reasons: list[str] = []
    notes: list[str] = []
    out: dict[str, Any] = {}

    user, system = _user_and_system(raw.get("prompt"))
    out["system_prompt"], out["user_prompt"] = system, user
    parsed: ParsedQuestion | None = None
    if user is None:
        reasons.append("prompt has no user message")
    else:
        try:
            parsed = parse_user_message(user)
        except ValueError as exc:
            reasons.append(str(exc))

    videos = raw.get("videos")
    video: dict[str, Any] = {}
    n_videos = len(videos) if isinstance(videos, list) else 0
    if n_videos != 1:
        reasons.append(f"row has {n_videos} videos; exactly one expected")
    elif not isinstance(videos[0], dict) or not isinstance(videos[0].get("video"), str):
        reasons.append("video entry has no 'video' path")
    else:
        video = videos[0]
        uri = video["video"]
        if not uri.startswith(FILE_SCHEME):
            reasons.append(f"video {uri!r} is not a file:// URI")
        elif file_uri_to_path(uri) is None:
            reasons.append(f"video {uri!r} is not a local file:// path")
    out["video_uri"] = video.get("video")
    missing_settings = []
    for name, kind in VIDEO_SETTINGS.items():
        out[name] = _video_setting(video.get(name), kind)
        if out[name] is None:
            missing_settings.append(name)

    reward_model = raw.get("reward_model")
    ground_truth = None
    if not isinstance(reward_model, dict):
        reasons.append("reward_model is missing")
        out["reward_style"] = None
    else:
        ground_truth = reward_model.get("ground_truth")
        out["reward_style"] = _text(reward_model.get("style"))
        if not isinstance(ground_truth, str) or not ground_truth:
            reasons.append("ground truth is missing")
            ground_truth = None
        elif parsed is not None and ground_truth not in dict(parsed.options):
            reasons.append(f"ground truth {ground_truth!r} is not one of the options "
                           f"{parsed.option_letters}")
    out["ground_truth"] = ground_truth

    data_source = raw.get("data_source")
    if data_source is None:
        reasons.append("data_source is null")
    elif expected is not None and data_source != expected:
        reasons.append(f"data_source {data_source!r} does not match {expected!r} expected for "
                       f"{source_file}")
    out["data_source"] = data_source
    out["ability"] = _text(raw.get("ability"))

    extra_info = raw.get("extra_info")
    if not isinstance(extra_info, dict):
        notes.append("extra_info is null; metadata fields left null")
        extra_info = {}
    for name in EXTRA_INFO_FIELDS:
        out[name] = _text(extra_info.get(name))
    if extra_info and ground_truth is not None and out["answer"] != ground_truth:
        notes.append(f"extra_info.answer {out['answer']!r} differs from ground truth "
                     f"{ground_truth!r}; ground truth used")

    images = raw.get("images")
    if isinstance(images, list) and images:
        notes.append(f"row has {len(images)} images; expected none (kept in the raw file only)")
    if video and missing_settings:
        notes.append(f"video settings missing: {', '.join(missing_settings)}; left null")

    if parsed is not None:
        out["question"] = parsed.question
        out["option_letters"] = parsed.option_letters
        out["options"] = [{"letter": letter, "text": text} for letter, text in parsed.options]
        out["n_options"] = len(parsed.options)
    return out, reasons, notes


def _kind(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{_kind(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def _type_problems(schema: pa.Schema) -> list[str]:
    """Each required column whose shape differs from the card's schema, named with the expected
    and the found type. Values inside are converted per value (an integer fps loads), but a
    column that is a string where a struct belongs cannot be read row by row meaningfully. An
    all-null column (type null) passes: its rows say what is missing."""
    problems = []
    for want in VAL_SCHEMA:
        found = schema.field(want.name).type
        if _kind(found) not in (_kind(want.type), "null", "list<null>"):
            problems.append(f"column {want.name} has type {found}, expected {want.type}")
    return problems


def read_val_parquet(path: Path, expected_data_source: str | None) -> ReadResult:
    """Read one val parquet; see the module docstring for what is accepted, noted or rejected."""
    source_file = path.name
    result = ReadResult()
    try:
        data = path.read_bytes()
    except OSError as exc:
        result.rejects.append(_reject(source_file, "file_rejected",
                                      f"cannot read {source_file}: {exc}"))
        return result
    result.fingerprint = hashlib.sha256(data).hexdigest()
    try:
        # ParquetFile, not pq.read_table: read_table on an in-memory buffer goes through the
        # dataset layer and was seen (pyarrow 26) to abort the interpreter at exit now and then.
        table = pq.ParquetFile(pa.BufferReader(data)).read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        result.rejects.append(_reject(source_file, "file_rejected",
                                      f"{source_file} is not a readable parquet file: {exc}"))
        return result
    result.n_rows = table.num_rows

    names = table.column_names
    duplicated = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicated:
        result.rejects.append(_reject(source_file, "file_rejected",
                                      f"duplicate column(s): {', '.join(duplicated)}"))
        return result
    missing = [name for name in VAL_SCHEMA.names if name not in names]
    if missing:
        result.rejects.append(_reject(source_file, "file_rejected",
                                      f"missing required column(s): {', '.join(missing)}"))
        return result
    mismatched = _type_problems(table.schema)
    if mismatched:
        result.rejects.append(_reject(source_file, "file_rejected", "; ".join(mismatched)))
        return result
    extra_cols = [name for name in names if name not in VAL_SCHEMA.names]
    for name in extra_cols:
        result.rejects.append(_reject(source_file, "noted",
                                      f"extra column {name!r} kept in extra_columns"))
    # Unknown extra_info fields would otherwise vanish when it is flattened; keep them too.
    info_type = table.schema.field("extra_info").type
    extra_info_fields = ([f.name for f in info_type if f.name not in EXTRA_INFO_FIELDS]
                         if pa.types.is_struct(info_type) else [])
    for name in extra_info_fields:
        result.rejects.append(_reject(source_file, "noted",
                                      f"extra_info field {name!r} kept in extra_columns"))

    # One to_pylist per column: per-row Arrow slicing is orders of magnitude slower.
    columns = {name: table.column(name).to_pylist() for name in names}
    first_of: dict[str, str] = {}  # what a row asks -> the uid of the first row asking it
    for row_index in range(table.num_rows):
        raw = {name: values[row_index] for name, values in columns.items()}
        data_source = raw.get("data_source")
        uid_source = data_source if isinstance(data_source, str) and data_source else (
            expected_data_source or source_file)
        uid = f"{uid_source}:{row_index}"
        out, reasons, notes = _check_row(raw, expected_data_source, source_file)
        if reasons:
            result.rejects.append(_reject(source_file, "row_rejected", "; ".join(reasons),
                                          row_index, uid, _to_json(raw, RAW_BYTES_LIMIT)))
            continue
        # A repeated row stays a question of its own (uids are row positions, as the card
        # counts rows) but is flagged: it weighs twice in every mean.
        asked = _to_json([out[k] for k in ("data_source", "user_prompt", "video_uri",
                                           "ground_truth", *VIDEO_SETTINGS)], None)
        first = first_of.setdefault(asked, uid)
        if first != uid:
            notes = [*notes, f"duplicate of {first}: the same prompt, video, video settings and "
                             "ground truth (kept as its own question; it counts twice)"]
        for note in notes:
            result.rejects.append(_reject(source_file, "noted", note, row_index, uid))

        extras = {name: raw[name] for name in extra_cols}
        info = raw.get("extra_info")
        for name in extra_info_fields:
            extras[f"extra_info.{name}"] = info.get(name) if isinstance(info, dict) else None
        result.rows.append({
            "uid": uid,
            "data_source": out["data_source"],
            "row_index": row_index,
            "question": out["question"],
            "option_letters": out["option_letters"],
            "options": out["options"],
            "n_options": out["n_options"],
            "ground_truth": out["ground_truth"],
            "reward_style": out["reward_style"],
            "ability": out["ability"],
            "system_prompt": out["system_prompt"],
            "user_prompt": out["user_prompt"],
            **{name: out[name] for name in EXTRA_INFO_FIELDS},
            "video_uri": out["video_uri"],
            **{name: out[name] for name in VIDEO_SETTINGS},
            "source_file": source_file,
            "source_fingerprint": result.fingerprint,
            "extra_columns": _to_json(extras, None) if extras else None,
        })
    return result


# raw_vv_questions and raw_vv_rejects: what read_val_parquet accepts and refuses
OPTION = pa.struct([("letter", pa.string()), ("text", pa.string())])
QUESTIONS_SCHEMA = raw_schema("vv_questions")
VAL_REJECTS_SCHEMA = raw_schema("vv_rejects")
