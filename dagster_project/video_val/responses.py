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

import polars as pl

from dagster_project.dropfolder import read_records
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
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        problems.append(f"step {step!r} is not a non-negative integer")
    if sample is None:
        sample = 0
    if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
        problems.append(f"sample_idx {sample!r} is not a non-negative integer")
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
    if problems:
        return None, "; ".join(problems)
    return {"run_id": run_id, "step": step, "uid": uid, "sample_idx": sample,
            "response": response, "response_digest": response_digest(response)}, None


def _read(f: ResponseFile):
    return read_records(f.path, f.source_file, accept=(".jsonl", ".parquet"),
                        max_record_bytes=MAX_RECORD_BYTES)


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


def write_response_part(f: ResponseFile, rows_path: Path, rejects_path: Path,
                        questions: pl.DataFrame | None = None) -> dict[str, int]:
    """Parse one file version into its two parts, `BATCH_ROWS` rows at a time; the counts.
    Another tool's output (`f.tool` set) is resolved against `questions` (vv_questions)."""
    where = {"source_file": f.source_file, "file_version": f.version}
    counts = {"rows": 0, "rejects": 0}
    if f.tool is not None and questions is None:
        raise ValueError(f"{f.source_file}: a {f.tool} file needs the questions")
    schema = RESPONSES_SCHEMA if f.tool != "verl" else RESPONSES_SCHEMA.with_metadata(
        {DUMP_PART_KEY: f.source_file.encode()})
    with streaming_parquet(rows_path, schema) as rows_out, \
            streaming_parquet(rejects_path, RESPONSE_REJECTS_SCHEMA) as rejects_out:
        rows: list[dict] = []
        rejects: list[dict] = []
        records = (_dump_records(f, questions) if f.tool == "verl"
                   else _sample_log_records(f, questions) if f.tool == "lmms-eval"
                   else _records(f))
        for line, row, problem, raw in records:
            if row is not None:
                rows.append({**row, **where, "line": line})
                if len(rows) == BATCH_ROWS:
                    rows_out.write(rows_to_table(rows, RESPONSES_SCHEMA))
                    counts["rows"] += len(rows)
                    rows = []
            else:
                rejects.append({**where, "line": line, "reason": problem, "raw": raw})
                if len(rejects) == BATCH_ROWS:
                    rejects_out.write(rows_to_table(rejects, RESPONSE_REJECTS_SCHEMA))
                    counts["rejects"] += len(rejects)
                    rejects = []
        rows_out.write(rows_to_table(rows, RESPONSES_SCHEMA))
        rejects_out.write(rows_to_table(rejects, RESPONSE_REJECTS_SCHEMA))
        counts["rows"] += len(rows)
        counts["rejects"] += len(rejects)
    return counts


# raw_vv_responses: the well-formed records of every file version, one part per version
RESPONSES_SCHEMA = raw_schema("vv_responses")
# raw_vv_response_rejects: the malformed ones (and the problems of whole files)
RESPONSE_REJECTS_SCHEMA = raw_schema("vv_response_rejects")
