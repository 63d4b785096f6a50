"""Reading model responses for the val suite from RESPONSES_DIR (JSONL or Parquet).

A response record is `run_id, step, uid` (or `data_source` + `row_index` instead of `uid`),
`sample_idx` (default 0) and `response`; `step` is an integer or a checkpoint name such as
`global_step_80`. Every record ends up either in the accepted rows or in
the rejects with its file, line and reason; nothing is dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from dagster_project.dropfolder import read_records

# A long chain of thought is tens of KB: a record over 4 MB is a runaway, refused alone.
MAX_RECORD_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ResponseFile:
    source_file: str  # relative to RESPONSES_DIR
    version: int
    path: Path  # where the bytes are (the archive copy)


@dataclass
class ResponsesResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0


def _uid(obj: Mapping[str, Any], known: Mapping[str, str]) -> tuple[str | None, str | None]:
    uid = obj.get("uid")
    if uid is None and "data_source" in obj and "row_index" in obj:
        if not isinstance(obj["row_index"], int) or isinstance(obj["row_index"], bool):
            return None, f"row_index {obj['row_index']!r} is not an integer"
        uid = f"{obj['data_source']}:{obj['row_index']}"
    if not isinstance(uid, str):
        return None, "no uid (and no data_source + row_index)"
    if uid not in known:
        return None, f"unknown uid {uid!r}: not a question of vv_questions"
    return uid, None


def read_responses(files: Sequence[ResponseFile], known_uids: Mapping[str, str]
                   ) -> ResponsesResult:
    """`known_uids` maps uid → data_source. Files in the given order (path, then version)."""
    res = ResponsesResult()
    seen_hash: dict[str, str] = {}
    seen_key: dict[tuple, str] = {}

    def reject(f: ResponseFile, line: int | None, reason: str, raw: str | None) -> None:
        res.rejects.append({"source_file": f.source_file, "file_version": f.version,
                            "line": line, "reason": reason, "raw": raw})

    for f in files:
        for rec in read_records(f.path, f.source_file, accept=(".jsonl", ".parquet"),
                                max_record_bytes=MAX_RECORD_BYTES):
            line, obj, raw = rec.line, rec.value, rec.raw
            if rec.problem is not None:
                reject(f, line, rec.problem, raw)
                continue
            where = f"{f.source_file} v{f.version} line {line}"
            if not isinstance(obj, dict):
                reject(f, line, "not a JSON object", raw)
                continue
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
            uid, uid_problem = _uid(obj, known_uids)
            if uid_problem:
                problems.append(uid_problem)
            if problems:
                reject(f, line, "; ".join(problems), raw)
                continue
            digest = hashlib.sha256(json.dumps(
                [run_id, step, uid, sample, response], ensure_ascii=False).encode()).hexdigest()
            if digest in seen_hash:
                res.duplicates += 1
                reject(f, line, f"duplicate of {seen_hash[digest]} (same content): ignored", raw)
                continue
            key = (run_id, step, uid, sample)
            if key in seen_key:
                reject(f, line, f"conflicts with {seen_key[key]}: same run_id/step/uid/sample_idx,"
                                " different response (use another sample_idx)", raw)
                continue
            seen_hash[digest] = seen_key[key] = where
            res.rows.append({"run_id": run_id, "step": step, "uid": uid,
                             "data_source": known_uids[uid], "sample_idx": sample,
                             "response": response, "source_file": f.source_file,
                             "file_version": f.version, "line": line})
    res.rows.sort(key=lambda r: (r["run_id"], r["step"], r["uid"], r["sample_idx"]))
    return res


# raw/vv_responses and raw/vv_response_rejects: what read_responses accepts and refuses
RESPONSES_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("step", pa.int64()), ("uid", pa.string()),
    ("data_source", pa.string()), ("sample_idx", pa.int64()), ("response", pa.string()),
    ("source_file", pa.string()), ("file_version", pa.int32()), ("line", pa.int64()),
])
RESPONSE_REJECTS_SCHEMA = pa.schema([
    ("source_file", pa.string()), ("file_version", pa.int32()), ("line", pa.int64()),
    ("reason", pa.string()), ("raw", pa.string()),
])
