"""Judgment and GT compilation records: reading them from the drop folder, the metric contract,
the case context they are checked against, and readable reasons for every record that cannot be
accepted (JSON Schemas in `assets/schemas/`, then the ingested systems, cases, candidates and
evidence).

`line` of a record or reject row is the 1-based line of a `.jsonl` file, 1 for a `.json` file
holding one object, the 1-based record index for a `.json` file holding an array, and None for a
problem of the whole file (wrong extension, unreadable, not parseable, no records). Files of any
size are streamed; a single record over `MAX_RECORD_BYTES` is one reject with its line.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from dagster_project.dropfolder import versions_of
from dagster_project.records import ZERO_DIGITS, read_records
from dagster_project.settings import ASSETS_DIR
from dagster_project.warehouse.seeds import read_seed

# A judgment is a few KB: a record over 1 MB is a runaway, refused alone (files: any size).
MAX_RECORD_BYTES = 1024 * 1024
JUDGMENT_SCHEMA = "judgment_record.schema.json"
GT_SCHEMA = "gt_compilation.schema.json"


# The metric contract, one row per metric (the dbt seed `rvp_metrics`, which the views read too):
# name, column of the judgments table, axis, and rule (`required`; `explicit_plan`: required iff
# the case has an explicit plan, refused otherwise; `diagnostic`: optional, recorded, never
# scored). A new metric is a new row there (and its weight rows in the seed rvp_metric_weights).
METRICS: list[dict[str, str]] = read_seed("rvp_metrics")
METRIC_COLUMNS: dict[str, str] = {m["metric"]: m["column"] for m in METRICS}
REQUIRED_METRICS = tuple(m["metric"] for m in METRICS if m["rule"] == "required")
PLAN_METRICS = tuple(m["metric"] for m in METRICS if m["rule"] == "explicit_plan")

REJECT_COLUMNS = ("source_file", "file_version", "line", "reason", "raw")


@dataclass(frozen=True)
class CaseInfo:
    has_explicit_plan: bool
    intervals: frozenset[str]  # interval strings exactly as in gt_annotations.json


@dataclass(frozen=True)
class CandidateInfo:
    modality: str  # "video" | "images"
    step_ids: frozenset[str]


@dataclass(frozen=True)
class EvalContext:
    systems: frozenset[str]
    cases: Mapping[str, CaseInfo]
    candidates: Mapping[tuple[str, str], CandidateInfo]  # (system, case_id) -> candidate
    evidence_ids: Mapping[str, frozenset[str]]  # "<system>/<case_id>" -> ids that exist for it
    gt_fingerprints: Mapping[str, str]  # case_id -> current GT fingerprint (current prompts)
    # case_id -> "case refused at <stage>: <why>" for the cases the ingest refused
    refused: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceFile:
    source_file: str  # display name, relative to JUDGMENTS_DIR (posix separators)
    version: int  # 1, 2, ... for successive contents of the same path
    sha256: str  # of the bytes at `path`, as recorded when the version was archived
    path: Path  # where the bytes are (e.g. an archive copy)

    @classmethod
    def current(cls, versions: list[dict], roots: Sequence[Path]) -> list[SourceFile]:
        """The current versions of drop folders `roots` (`dropfolder.archive_versions`)."""
        return [cls(v["source_file"], v["version"], v["sha256"], Path(v["archived_path"]))
                for v in versions_of(versions, roots)]


# --- reading files into records ------------------------------------------------------------


@dataclass(frozen=True)
class _Record:
    source: SourceFile
    line: int
    raw: str
    obj: Any
    sorted_text: bytes | None = None  # `records.Record.sorted_text`

    @property
    def where(self) -> str:
        return f"{self.source.source_file} v{self.source.version} line {self.line}"


def _reject(sf: SourceFile, line: int | None, reason: str, raw: str | None) -> dict[str, Any]:
    return {"source_file": sf.source_file, "file_version": sf.version, "line": line,
            "reason": reason, "raw": raw}


def _read(sf: SourceFile) -> Iterator[_Record | dict[str, Any]]:
    """The records of one file version (the drop-folder reader: streamed, strict JSON, a limit
    per record), or reject rows for what cannot be read."""
    for rec in read_records(sf.path, sf.source_file, accept=(".json", ".jsonl"),
                            max_record_bytes=MAX_RECORD_BYTES, sha256=sf.sha256):
        if rec.problem is not None:
            yield _reject(sf, rec.line, rec.problem, rec.raw)
        else:
            yield _Record(sf, rec.line, rec.raw or "", rec.value, rec.sorted_text)


# --- readable reasons ----------------------------------------------------------------------


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((ASSETS_DIR / "schemas" / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@cache
def _fast_check(name: str, own_metrics: bool = False) -> Callable[[Any], bool]:
    """The schema compiled by jsonschema-rs: whether a record is valid, ~8× faster than
    fastjsonschema and far more than walking it with jsonschema, so a valid record (the common
    case) costs little. A record it refuses is walked by jsonschema for the reasons (and if
    jsonschema finds none, it is valid). `own_metrics`: the schema with `metrics` unconstrained,
    what is left once the metric checks speak for the metrics (an error under `metrics` comes
    from its own subschema only: the root has no combinators), so that a record refused for its
    metrics alone (~2 ms walked by jsonschema) is not walked."""
    schema = json.loads((ASSETS_DIR / "schemas" / name).read_text(encoding="utf-8"))
    if own_metrics:
        schema["properties"]["metrics"] = {}
    return jsonschema_rs.validator_for(schema).is_valid


# orjson writes otherwise than `json.dumps`: a float in exponent form (`1e-7`: a digit, `e`, an
# optional sign, a digit) or below 1e-4 (json `1e-05`, orjson `0.00001`), DEL (json escapes it)
# and non-ASCII text. Every digit made a 0 (one C pass), a digit before an `e` is a plain
# search; one inside a string too (`"v1e"`) only sends that record to json, which is exact.


def _orjson_differs(text: bytes) -> bool:
    return (not text.isascii() or b"0.0000" in text or b"\x7f" in text
            or b"0e" in text.translate(ZERO_DIGITS))


def canonical_json(value: Any, sorted_text: bytes | None = None) -> str:
    """`value` as sorted, compact JSON, ASCII only: exactly `json.dumps(value, sort_keys=True,
    separators=(",", ":"))`, written by orjson (~10x faster) whenever its text is provably the
    same, by json otherwise (integers over 64 bits, deep nesting, the forms above).
    `sorted_text`: orjson's sorted text of `value`, when the reader has it already."""
    text = sorted_text
    if text is None:
        try:
            text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            text = None
    if text is None or _orjson_differs(text):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text.decode("ascii")


def _sha(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _show(value: Any, limit: int = 80) -> str:
    """A value as the user wrote it (JSON), shortened: `"80"`, `true`, `101`."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _q(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else _show(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _show(value)
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


_TYPE_NAMES = {"object": "an object", "array": "an array", "string": "a string",
               "number": "a number", "integer": "an integer", "boolean": "true/false",
               "null": "null"}
_ITEM_LABELS = {"hallucinations": "hallucination", "stages": "stage entry",
                "evidence": "evidence id"}
_PATTERN_NAMES = {"^[0-9a-f]{64}$": "64 lowercase hex digits (a sha256)"}


def _path_parts(path: Sequence[Any]) -> tuple[str, str]:
    """(prefix, field): `hallucinations/0/severity` -> ("hallucination 1", "severity")."""
    parts = list(path)
    prefix = ""
    if len(parts) >= 2 and parts[0] in _ITEM_LABELS and isinstance(parts[1], int):
        prefix = f"{_ITEM_LABELS[parts[0]]} {parts[1] + 1}"
        parts = parts[2:]
    fld = ""
    for part in parts:
        fld += f" item {part + 1}" if isinstance(part, int) else f"{'.' if fld else ''}{part}"
    return prefix, fld


def _schema_reason(err: ValidationError, done: set[tuple[str, ...]]) -> str | None:
    """One readable sentence for a schema error (None when already covered by another)."""
    path = tuple(err.absolute_path)
    prefix, fld = _path_parts(path)
    kw = err.validator
    in_judge = bool(path) and path[0] == "judge"
    if kw in ("required", "additionalProperties"):  # about the object's keys
        if kw == "required":
            key = ("required", *map(str, path))
            if key in done:  # jsonschema reports each missing property separately: group them
                return None
            done.add(key)
            names = ", ".join(p for p in err.validator_value if p not in err.instance)
            if in_judge:
                return f"judge metadata incomplete: missing {names}"
            body = f"missing {names}" if path else f"missing field {names}"
        else:
            allowed = set(err.schema.get("properties", {}))
            extra = ", ".join(repr(k) for k in err.instance if k not in allowed)
            body = f"unexpected field {extra}"
        return ": ".join(p for p in (prefix, fld, body) if p)
    subject = fld or prefix or "record"
    if kw == "type":
        wanted = err.validator_value
        wanted = wanted if isinstance(wanted, list) else [wanted]
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in wanted)
        body = f"{subject} is {_show(err.instance)}, not {names}"
    elif kw == "enum":
        options = ", ".join(str(v) for v in err.validator_value)
        body = f"{subject} is {_show(err.instance)}, not one of {options}"
    elif kw == "minimum":
        body = f"{subject} = {_show(err.instance)} is below the minimum {err.validator_value}"
    elif kw == "maximum":
        body = f"{subject} = {_show(err.instance)} is above the maximum {err.validator_value}"
    elif kw == "minLength":
        if in_judge:
            return f"judge metadata incomplete: {fld.removeprefix('judge.')} is empty"
        body = f"{subject} is empty"
    elif kw == "minItems":
        body = f"{subject} is empty (at least {err.validator_value} needed)"
    elif kw == "pattern":
        form = _PATTERN_NAMES.get(err.validator_value, f"the pattern {err.validator_value}")
        body = f"{subject} {_show(err.instance)} is not {form}"
    else:  # a keyword the schemas may gain later: jsonschema's own (short) message
        body = f"{subject}: {err.message}"
    return f"{prefix}: {body}" if prefix and fld else body


def _schema_reasons(schema: str, obj: dict[str, Any], own_metrics: bool,
                    valid: bool | None = None) -> list[str]:
    """`valid`: `_fast_check(schema)(obj)`, when the caller has it."""
    if valid is None:
        valid = _fast_check(schema)(obj)
    if valid or (own_metrics and _fast_check(schema, True)(obj)):
        return []  # valid, or refused for its metrics alone (their own checks say why)
    # jsonschema says why, in its words
    reasons: list[str] = []
    done: set[tuple[str, ...]] = set()
    for err in _validator(schema).iter_errors(obj):
        # The metric checks below give sharper messages ("missing metric VR-4") than the schema.
        if own_metrics and err.absolute_path and err.absolute_path[0] == "metrics":
            continue
        reason = _schema_reason(err, done)
        if reason is not None:
            reasons.append(reason)
    return reasons


def _integer_reasons(obj: dict[str, Any]) -> list[str]:
    # jsonschema counts 1.0 as an integer; an attempt number must be written as one.
    reasons = []
    if isinstance(obj.get("attempt"), float):
        reasons.append(f"attempt is {_show(obj['attempt'])}, not an integer")
    stages = obj.get("stages")
    if isinstance(stages, list):
        for i, entry in enumerate(stages, start=1):
            if isinstance(entry, dict) and isinstance(entry.get("attempt"), float):
                reasons.append(f"stage entry {i}: attempt is {_show(entry['attempt'])}, "
                               "not an integer")
    return reasons


def _metric_reasons(metrics: dict[str, Any], case_id: str, case: CaseInfo | None,
                    in_range: bool = False) -> list[str]:
    """`in_range`: the record passed its schema, whose metrics are numbers of 0-100 (JSON has
    no NaN; true is not a number there), so only their names are left to check."""
    reasons = []
    for name, value in metrics.items():
        if name not in METRIC_COLUMNS:
            reasons.append(f"unknown metric {_q(name)}")
        elif in_range:
            continue
        # bool is an int subclass in Python: true must not be read as 1.
        elif isinstance(value, bool) or not isinstance(value, int | float):
            reasons.append(f"metric {name} is {_show(value)}, not a number")
        elif not (math.isfinite(value) and 0 <= value <= 100):
            reasons.append(f"metric {name} = {_show(value)} is outside 0-100")
    reasons += [f"missing metric {name}" for name in REQUIRED_METRICS if name not in metrics]
    if case is not None:
        for name in PLAN_METRICS:
            if case.has_explicit_plan and name not in metrics:
                reasons.append(f"{name} missing: case {case_id} has an explicit plan")
            elif not case.has_explicit_plan and name in metrics:
                reasons.append(f"{name} given but case {case_id} has no explicit plan")
    return reasons


# --- validation against the case context ---------------------------------------------------


def judgment_reasons(obj: dict[str, Any], ctx: EvalContext,
                     owner_of: Callable[[str], str | None]) -> list[str]:
    """Why a judgment record (a JSON object) cannot be accepted: its schema, then its systems,
    case, candidate, metrics, hallucination loci, evidence ids and judge modality against the
    ingested data. `owner_of` names the evaluation an evidence id belongs to (or None)."""
    metrics = obj.get("metrics")
    valid = _fast_check(JUDGMENT_SCHEMA)(obj)
    reasons = _schema_reasons(JUDGMENT_SCHEMA, obj, isinstance(metrics, dict), valid)
    reasons += _integer_reasons(obj)
    system, case_id = obj.get("system"), obj.get("case_id")
    known_system = isinstance(system, str) and system in ctx.systems
    if isinstance(system, str) and system and not known_system:
        reasons.append(f"unknown system {_q(system)}")
    case = ctx.cases.get(case_id) if isinstance(case_id, str) else None
    if isinstance(case_id, str) and case_id and case is None:
        reasons.append(ctx.refused.get(case_id) or f"unknown case {_q(case_id)}")
    cand = None
    if known_system and case is not None:
        cand = ctx.candidates.get((str(system), case_id))
        if cand is None:
            reasons.append(f"no candidate of system {system} for case {case_id}: "
                           "nothing was judged")
    if isinstance(metrics, dict):
        reasons += _metric_reasons(metrics, str(case_id), case, in_range=valid)
    hallucinations = obj.get("hallucinations")
    if case is not None and isinstance(hallucinations, list):
        steps = cand.step_ids if cand is not None else frozenset()
        for no, item in enumerate(hallucinations, start=1):
            locus = item.get("locus") if isinstance(item, dict) else None
            if isinstance(locus, str) and locus and locus not in case.intervals | steps:
                reasons.append(f"hallucination {no}: locus {_q(locus)} is neither an "
                               f"interval of case {case_id} nor a step id of the candidate")
    evidence = obj.get("evidence")
    if cand is not None and isinstance(evidence, list):
        # Only checkable when the evaluation exists; otherwise "no candidate" says it all.
        evaluation_id = f"{system}/{case_id}"
        own = ctx.evidence_ids.get(evaluation_id, frozenset())
        for eid in evidence:
            if isinstance(eid, str) and eid and eid not in own:
                owner = owner_of(eid)
                why = f"it is evidence of {owner}" if owner else "no such evidence id"
                reasons.append(f"evidence id {_q(eid)} does not belong to evaluation "
                               f"{evaluation_id} ({why})")
    if "review" in obj and obj.get("attempt_kind") != "manager_review":
        reasons.append("review given but attempt_kind is not manager_review")
    judge = obj.get("judge")
    modality = judge.get("input_modality") if isinstance(judge, dict) else None
    if cand is not None and modality in ("video", "images") and modality != cand.modality:
        reasons.append(f"judge input_modality {_q(modality)} differs from the candidate's "
                       f"modality {_q(cand.modality)}")
    return reasons


def gt_reasons(obj: dict[str, Any], ctx: EvalContext) -> list[str]:
    """Why a GT compilation record (a JSON object) cannot be accepted: its schema, its case, and
    the agreement of its two prompt versions."""
    reasons = _schema_reasons(GT_SCHEMA, obj, own_metrics=False)
    case_id = obj.get("case_id")
    if isinstance(case_id, str) and case_id and case_id not in ctx.cases:
        reasons.append(ctx.refused.get(case_id) or f"unknown case {_q(case_id)}")
    judge = obj.get("judge")
    inner = judge.get("prompt_version") if isinstance(judge, dict) else None
    outer = obj.get("prompt_version")
    if isinstance(inner, str) and isinstance(outer, str) and inner and outer != inner:
        # The fingerprint covers one prompt version; two different ones make it ambiguous.
        reasons.append(f"prompt_version {_q(outer)} differs from judge.prompt_version "
                       f"{_q(inner)}")
    return reasons
