"""Reading model responses for the val suite from RESPONSES_DIR (JSONL or Parquet), one file
version at a time.

A response record is `run_id, step, uid` (or `data_source` + `row_index` instead of `uid`),
`sample_idx` (default 0) and `response`; `step` is an integer or a checkpoint name such as
`global_step_80`. verl validation dumps (`<run_id>/<global_step>.jsonl`, see `verl_dumps`) and
lmms-eval sample logs (`<model>/<date>_samples_<task>.jsonl`, see `lmms_eval_samples`) are read
too, each row resolved to its question (by position, by content). Each archived file version is
parsed once, streamed, into its own part:
`raw_vv_responses/<part>.parquet` (the well-formed records, in file order) and
`raw_vv_response_rejects/<part>.parquet` (the malformed ones, with line and reason). A part is
keyed by the version (file name, version number, content hash) and `PARSER_VERSION`
(`response_parts`), so a version already parsed is never read again and a change of the rules
here parses everything again.

What depends on more than one record is decided in SQL over the union of the parts
(`int_vv_response_status`): a uid that is not a question, a duplicate (same key, same response)
and a conflict (same key, another response) of an earlier record, in (file, version, line) order.
Nothing is dropped silently: every record is a row of the responses or of the rejects.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from dagster_project.filecache import Identity
from dagster_project.records import (
    NO_RECORDS,
    Record,
    jsonl_blocks,
    jsonl_record,
    read_records,
)
from dagster_project.tables import raw_schema, rows_to_table, streaming_parquet
from dagster_project.video_val import lmms_eval_samples, verl_dumps

# A long chain of thought is tens of KB: a record over 4 MB is a runaway, refused alone.
MAX_RECORD_BYTES = 4 * 1024 * 1024
# Bump when a rule of `record_problems` changes: every part is then parsed again.
PARSER_VERSION = "2"
# In the Parquet metadata of a part read from a verl dump (vv_verl_metrics are made of these)
DUMP_PART_KEY = b"benchlake.verl_dump"
# Rows per Parquet row group, and the most rows a parse holds at once.
BATCH_ROWS = 20_000


@dataclass(frozen=True)
class ResponseFile:
    source_file: str  # relative to RESPONSES_DIR
    version: int
    sha256: str
    path: Path  # where the bytes are (the archive copy)
    # `verl` (a validation dump) or `lmms-eval` (a sample log): the file is another tool's
    # output, its rows are resolved against the questions, whose fingerprint is `questions_key`
    tool: str | None = None
    questions_key: str | None = None
    # the drop folder's file and its identity at the scan, when `path` is still to be copied
    # from it (`dropfolder.archive_versions`' deferred copies; `response_parts.sync_parts`)
    copy_from: tuple[Path, Identity] | None = None

    @property
    def label(self) -> str:
        """What names its parts, readably: the file name and version."""
        return f"{self.source_file}.v{self.version}"

    def part_inputs(self) -> tuple:
        """Everything besides `PARSER_VERSION` that determines the version's parts."""
        return (self.source_file, self.version, self.sha256, self.tool, self.questions_key)


def response_digest(response: str) -> str:
    """What tells a duplicate (same response) from a conflict in SQL: 16 hex of sha256."""
    return hashlib.sha256(response.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_INT64_MAX = 2**63 - 1  # what the step and sample_idx columns hold
_TOO_LARGE = " of 64 bits"
# JSON can escape half of a UTF-16 pair alone ("\\ud800"): Python reads it, UTF-8 cannot hold it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def record_problems(obj: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the response row, None) for a well-formed record, else (None, every problem, joined)."""
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    problems = []
    run_id, step, response = obj.get("run_id"), obj.get("step"), obj.get("response")
    sample = obj.get("sample_idx", 0)
    if not isinstance(run_id, str) or not run_id:
        problems.append("run_id missing or not a string")
    if isinstance(step, str) and re.fullmatch(r"(?:global_step_)?\d+", step):
        step = int(step.rsplit("_", 1)[-1])  # verl checkpoints: "global_step_80" → 80
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= _INT64_MAX:
        problems.append(f"step {step!r} is not a non-negative integer" + _TOO_LARGE * (
            isinstance(step, int) and step > _INT64_MAX))
    if sample is None:
        sample = 0
    if not isinstance(sample, int) or isinstance(sample, bool) or not 0 <= sample <= _INT64_MAX:
        problems.append(f"sample_idx {sample!r} is not a non-negative integer" + _TOO_LARGE * (
            isinstance(sample, int) and sample > _INT64_MAX))
    if not isinstance(response, str):
        problems.append("response missing or not a string")
    uid = obj.get("uid")
    if uid is None and "data_source" in obj and "row_index" in obj:
        if not isinstance(obj["row_index"], int) or isinstance(obj["row_index"], bool):
            problems.append(f"row_index {obj['row_index']!r} is not an integer")
        else:
            uid = f"{obj['data_source']}:{obj['row_index']}"
    elif not isinstance(uid, str):
        problems.append("no uid (and no data_source + row_index)")
    for name, value in (("run_id", run_id), ("uid", uid), ("response", response)):
        lone = _SURROGATE.search(value) if isinstance(value, str) else None
        if lone:
            problems.append(f"{name} holds a lone surrogate (U+{ord(lone[0]):04X}): not Unicode "
                            "text")
    if problems:
        return None, "; ".join(problems)
    return {"run_id": run_id, "step": step, "uid": uid, "sample_idx": sample,
            "response": response, "response_digest": response_digest(response)}, None


def _read(f: ResponseFile):
    # a version not copied yet: its file, to tell its tool (the copy checks the bytes)
    return read_records(f.path if f.copy_from is None else f.copy_from[0], f.source_file,
                        accept=(".jsonl", ".parquet"), max_record_bytes=MAX_RECORD_BYTES)


def tool_of(f: ResponseFile) -> str | None:
    """Which tool wrote the version, told by the keys of its first record: `verl` (a validation
    dump: `input`, `output`, no `response`), `lmms-eval` (a sample log: `doc_id`,
    `filtered_resps`), None for benchlake's own records."""
    if not f.source_file.lower().endswith(".jsonl"):
        return None
    first = next((rec for rec in _read(f) if rec.problem is None), None)
    if first is None:
        return None
    if verl_dumps.is_dump_record(first.value):
        return "verl"
    if lmms_eval_samples.is_samples_record(first.value):
        return "lmms-eval"
    return None


def _records(f: ResponseFile) -> Iterator[tuple[int | None, dict | None, str | None, str | None]]:
    """(line, row, problem, raw) for every record of the version."""
    for rec in _read(f):
        if rec.problem is not None:
            yield rec.line, None, rec.problem, rec.raw
            continue
        row, problem = record_problems(rec.value)
        yield rec.line, row, problem, (rec.raw if problem else None)


def _dump_records(f: ResponseFile, questions: pl.DataFrame
                  ) -> Iterator[tuple[int | None, dict | None, str | None, str | None]]:
    """(line, row, problem, raw) for every line of a verl dump: read once to resolve the rows
    to questions (see `verl_dumps`), once more to write them."""
    location = verl_dumps.dump_location(f.source_file)
    if location is None:
        problem = ("a verl validation dump must be RESPONSES_DIR/<run_id>/<global_step>.jsonl "
                   "(the run is its folder, the step its file name)")
        for rec in _read(f):
            yield rec.line, None, rec.problem or problem, rec.raw
        return
    run_id, step = location
    scan = verl_dumps.scan(_read(f), step)
    resolutions = verl_dumps.resolve(scan.rows, scan.inputs, verl_dumps.dump_questions(questions))
    # line → (uid, sample_idx), or why not: refused on its own (scan) or by the alignment
    resolved = {**scan.refused,
                **{row.line: r for row, r in zip(scan.rows, resolutions, strict=True)}}
    del scan
    for rec in _read(f):
        found = resolved.get(rec.line) if rec.line is not None else None
        if found is None or isinstance(found, str):
            yield rec.line, None, rec.problem or found, rec.raw
            continue
        uid, sample = found
        output = rec.value["output"]
        yield rec.line, {"run_id": run_id, "step": step, "uid": uid, "sample_idx": sample,
                         "response": output, "response_digest": response_digest(output),
                         "tool": "verl", "tool_score": verl_dumps.score_value(rec.value),
                         "tool_extras": verl_dumps.extras(rec.value)}, None, None


def _sample_log_records(f: ResponseFile, questions: pl.DataFrame
                        ) -> Iterator[tuple[int | None, dict | None, str | None, str | None]]:
    """(line, row, problem, raw) for every logged document of an lmms-eval sample log."""
    location = lmms_eval_samples.samples_location(f.source_file)
    if location is None:
        problem = ("an lmms-eval sample log must be RESPONSES_DIR/<model>/<date>_samples_<task>"
                   f".jsonl of a supported task ({', '.join(lmms_eval_samples.TASKS)})")
        for rec in _read(f):
            yield rec.line, None, rec.problem or problem, rec.raw
        return
    run_id, step, source = location
    index = lmms_eval_samples.QuestionIndex(questions, source)
    for rec in _read(f):
        if rec.problem is not None:
            yield rec.line, None, rec.problem, rec.raw
            continue
        row, problem = (lmms_eval_samples.sample_row(rec.value, index)
                        if lmms_eval_samples.is_samples_record(rec.value)
                        else (None, "not an lmms-eval sample (needs doc_id and filtered_resps)"))
        if row is None:
            yield rec.line, None, problem, rec.raw
            continue
        yield rec.line, {"run_id": run_id, "step": step, **row, "tool": "lmms-eval",
                         "response_digest": response_digest(row["response"])}, None, None


# --- benchlake's own records, a block of lines at once --------------------------------------
#
# Nearly every line of a campaign file is one record in the shape benchlake's writers and the
# README give it: {"run_id": S, "step": N or "global_step_N", "uid": S, ["sample_idx": N,]
# "response": S}. A line that `_OWN_RECORD` matches whole (spaces or tabs between the tokens,
# unsigned integers that fit in 64 bits, run_id and uid without escapes, a response with valid
# escapes, no lone surrogate and no final backslash, nothing after the "}") is such an object:
# strict JSON reads it without a problem and `record_problems` accepts it as it is. Polars
# decodes all of a block's plain lines at once; every other line (blank, CRLF, other keys or
# another order, anything malformed) takes the record-by-record path, so the rows and rejects are
# those of `_records`, line for line.
#
# Matching `_OWN_RECORD` scans every byte with the regex engine, which costs as much as decoding;
# `_plain_records` checks the same with substring counts instead and lets the decoder check the
# response's characters (see there).

_WS = "[ \t]*"
_PLAIN = r'[^"\\\x00-\x1f]'  # a character a JSON string holds unescaped
_ESCAPE = r'\\["/bfnrt]|\\u(?:[0-9A-Ca-cEFef][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2})'
_INT = "(?:0|[1-9][0-9]{0,17})"


def _member(key: str, value: str) -> str:
    return f'"{key}"{_WS}:{_WS}{value}{_WS}'


# Everything up to the response's opening quote.
_HEAD = ("^" + _WS + r"\{" + _WS + _member("run_id", f'"{_PLAIN}+"') + "," + _WS
         + _member("step", f'(?:{_INT}|"(?:global_step_)?[0-9]{{1,18}}")') + "," + _WS
         + _member("uid", f'"{_PLAIN}*"') + f"(?:,{_WS}" + _member("sample_idx", _INT) + ")?"
         + "," + _WS + f'"response"{_WS}:{_WS}"')
_OWN_RECORD = (_HEAD + rf"(?:(?:{_PLAIN}|{_ESCAPE}|\\\\)*(?:{_PLAIN}|{_ESCAPE}))?"
               + r'"\}$')
_LONE_SURROGATE = r"\\u[Dd][89A-Fa-f]"
_OWN_FIELDS = pl.Struct({"run_id": pl.String, "step": pl.String, "uid": pl.String,
                         "sample_idx": pl.Int64, "response": pl.String})


def _plain_records(text: pl.Series) -> tuple[pl.Series, pl.DataFrame]:
    """Which lines `_OWN_RECORD` matches, and their fields (run_id, step as text, uid,
    sample_idx or null, response), decoded.

    The cheap way: the head matches, the line ends with `"}`, no `\\uD800`-`\\uDFFF`, and every
    quote after the head but the last follows a backslash. Then, if the line is valid JSON, the
    response runs to that last quote: had it ended at an earlier quote, another member would
    follow, whose key's opening quote follows a "," or a space. Polars' decoder refuses what
    strict JSON refuses inside a string (control characters, bad escapes; tests/video_val/
    test_responses.py holds it to that), but for a whole block at once: when it refuses, the
    block's lines are matched one by one."""
    t = pl.col("t")
    head = t.str.extract(_HEAD, 0)
    cheap = pl.DataFrame({"t": text}).select(
        (t.str.count_matches('"', literal=True) - t.str.count_matches('\\"', literal=True)
         == head.str.count_matches('"', literal=True) + 1)
        & t.str.ends_with('"}') & ~t.str.contains(_LONE_SURROGATE)).to_series().fill_null(False)
    try:
        fields = text.filter(cheap).str.json_decode(_OWN_FIELDS)
    except pl.exceptions.ComputeError:
        cheap = cheap & text.str.contains(_OWN_RECORD).fill_null(False)
        fields = text.filter(cheap).str.json_decode(_OWN_FIELDS)
    return cheap, fields.struct.unnest()


def _digests(responses: pl.Series) -> pl.Series:
    """`response_digest` of each value, hashed from the UTF-8 bytes Arrow already holds."""
    if responses.is_empty():
        return pl.Series([], dtype=pl.String)
    array = responses.rechunk().to_arrow().cast(pa.large_string())
    _, offsets, data = array.buffers()
    bounds = np.frombuffer(offsets, np.int64)[array.offset:array.offset + len(array) + 1]
    text, sha256 = memoryview(data or b""), hashlib.sha256
    return pl.Series([sha256(text[a:b]).hexdigest()[:16]
                      for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)],
                     dtype=pl.String)


def _own_blocks(f: ResponseFile) -> Iterator[tuple[pa.Table, pa.Table]]:
    """(rows, rejects) of each block of lines of a .jsonl file of benchlake's own records."""
    where = {"source_file": f.source_file, "file_version": f.version}
    found = False
    try:
        for first, lines in jsonl_blocks(f.path, MAX_RECORD_BYTES):
            raw = pl.Series([b"" if isinstance(x, Record) else x for x in lines],
                            dtype=pl.Binary)
            try:
                text = raw.cast(pl.String)
            except pl.exceptions.ComputeError:  # invalid UTF-8 somewhere: those lines are slow
                text = pl.Series([_utf8(x) for x in raw.to_list()], dtype=pl.String)
            fast, fields = _plain_records(text.zip_with(raw.bin.size() <= MAX_RECORD_BYTES,
                                                        pl.Series([None], dtype=pl.String)))
            numbers = pl.int_range(first, first + len(lines), eager=True).cast(pl.Int64)
            rows = fields.select(
                "run_id", pl.col("step").str.strip_prefix("global_step_").cast(pl.Int64),
                "uid", pl.col("sample_idx").fill_null(0), "response")
            rows = rows.with_columns(response_digest=_digests(rows["response"]),
                                     line=numbers.filter(fast))
            slow_rows, rejects = [], []
            for i in (~fast).arg_true().to_list():
                line = lines[i]
                rec = line if isinstance(line, Record) else jsonl_record(
                    line, first + i, MAX_RECORD_BYTES)
                if rec is None:
                    continue
                row, problem = (None, rec.problem) if rec.problem else record_problems(rec.value)
                if row is None:
                    rejects.append({**where, "line": rec.line, "reason": problem, "raw": rec.raw})
                else:
                    slow_rows.append({**row, "line": rec.line})
            if slow_rows:
                rows = pl.concat([rows, pl.DataFrame(slow_rows, schema=rows.schema)]).sort("line")
            found = found or rows.height > 0 or bool(rejects)
            yield _rows_table(rows, where), rows_to_table(rejects, RESPONSE_REJECTS_SCHEMA)
    except OSError as exc:
        found = True
        yield rows_to_table([], RESPONSES_SCHEMA), rows_to_table(
            [{**where, "line": None, "reason": f"cannot read file: {exc}", "raw": None}],
            RESPONSE_REJECTS_SCHEMA)
    if not found:
        yield rows_to_table([], RESPONSES_SCHEMA), rows_to_table(
            [{**where, "line": None, "reason": NO_RECORDS, "raw": None}], RESPONSE_REJECTS_SCHEMA)


def _rows_table(rows: pl.DataFrame, where: dict[str, Any]) -> pa.Table:
    """`rows` (a record's columns and its line) with `where` as a table of RESPONSES_SCHEMA."""
    table, n = rows.to_arrow(), rows.height
    return pa.table([table[field.name].cast(field.type) if field.name in table.column_names
                     else pa.array([where[field.name]] * n, field.type) if field.name in where
                     else pa.nulls(n, field.type) for field in RESPONSES_SCHEMA],
                    schema=RESPONSES_SCHEMA)


def _utf8(line: bytes) -> str | None:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


class _RowGroups:
    """Tables written in order as row groups of exactly `BATCH_ROWS` rows (the last fewer)."""

    def __init__(self, out: Any) -> None:
        self.out, self.pending, self.held, self.rows = out, [], 0, 0

    def add(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.held += table.num_rows
        while self.held >= BATCH_ROWS:
            held = pa.concat_tables(self.pending)
            self._write(held.slice(0, BATCH_ROWS))
            self.pending, self.held = [held.slice(BATCH_ROWS)], self.held - BATCH_ROWS

    def close(self) -> int:
        if self.held:
            self._write(pa.concat_tables(self.pending))
        return self.rows

    def _write(self, table: pa.Table) -> None:
        self.out.write(table.combine_chunks())  # one array per column, as the pages expect
        self.rows += table.num_rows


def _record_batches(records: Iterator[tuple[int | None, dict | None, str | None, str | None]],
                    f: ResponseFile) -> Iterator[tuple[pa.Table, pa.Table]]:
    """(rows, rejects) of `BATCH_ROWS` records at a time, from the record-by-record readers."""
    where = {"source_file": f.source_file, "file_version": f.version}
    rows: list[dict] = []
    rejects: list[dict] = []
    for line, row, problem, raw in records:
        if row is not None:
            rows.append({**row, **where, "line": line})
        else:
            rejects.append({**where, "line": line, "reason": problem, "raw": raw})
        if len(rows) == BATCH_ROWS or len(rejects) == BATCH_ROWS:
            yield (rows_to_table(rows, RESPONSES_SCHEMA),
                   rows_to_table(rejects, RESPONSE_REJECTS_SCHEMA))
            rows, rejects = [], []
    yield rows_to_table(rows, RESPONSES_SCHEMA), rows_to_table(rejects, RESPONSE_REJECTS_SCHEMA)


def write_response_part(f: ResponseFile, rows_path: Path, rejects_path: Path,
                        questions: pl.DataFrame | None = None) -> dict[str, int]:
    """Parse one file version into its two parts, `BATCH_ROWS` rows per row group; the counts.
    Another tool's output (`f.tool` set) is resolved against `questions` (vv_questions);
    benchlake's own .jsonl records are read a block of lines at once (`_own_blocks`)."""
    if f.tool is not None and questions is None:
        raise ValueError(f"{f.source_file}: a {f.tool} file needs the questions")
    schema = RESPONSES_SCHEMA if f.tool != "verl" else RESPONSES_SCHEMA.with_metadata(
        {DUMP_PART_KEY: f.source_file.encode()})
    if f.tool is None and f.source_file.lower().endswith(".jsonl") and _has_bytes(f.path):
        tables = _own_blocks(f)
    else:
        tables = _record_batches(_dump_records(f, questions) if f.tool == "verl"
                                 else _sample_log_records(f, questions) if f.tool == "lmms-eval"
                                 else _records(f), f)
    with streaming_parquet(rows_path, schema) as rows_out, \
            streaming_parquet(rejects_path, RESPONSE_REJECTS_SCHEMA) as rejects_out:
        rows, rejects = _RowGroups(rows_out), _RowGroups(rejects_out)
        for row_table, reject_table in tables:
            rows.add(row_table)
            rejects.add(reject_table)
        return {"rows": rows.close(), "rejects": rejects.close()}


def _has_bytes(path: Path) -> bool:
    """Whether the file can be read and is not empty (else `read_records` says what it is)."""
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


# raw_vv_responses: the well-formed records of every file version, one part per version
RESPONSES_SCHEMA = raw_schema("vv_responses")
# raw_vv_response_rejects: the malformed ones (and the problems of whole files)
RESPONSE_REJECTS_SCHEMA = raw_schema("vv_response_rejects")
