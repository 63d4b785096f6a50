"""Judgment records and recorded GT compilations into rows, with nothing lost or silently altered.

Input: the successive versions of the files in `JUDGMENTS_DIR` (`*.json`: one record or an array
of records; `*.jsonl`: one record per non-blank line). Files under `gt_compilations/` hold GT
compilation records, every other file judgment records; both are checked against the JSON Schemas
in `assets/schemas/` and then against the ingested data (systems, cases, candidates, evidence).

Every record ends up in exactly one place: an accepted row, or a reject row that says why and
keeps the raw text. Repeated records are ignored (and listed), and an accepted judgment is never
replaced: a different record with the same system/case/judge run/attempt is refused, because the
judge must send a new attempt instead of rewriting history.

`line` of a row is the 1-based line of a `.jsonl` file, 1 for a `.json` file holding one object,
the 1-based record index for a `.json` file holding an array, and None for a problem of the whole
file (wrong extension, unreadable, not parseable, no records). Files of any size are streamed; a
single record over `MAX_RECORD_BYTES` is one reject with its line.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from dagster_project.dropfolder import read_records
from dagster_project.settings import ASSETS_DIR

# A judgment is a few KB: a record over 1 MB is a runaway, refused alone (files: any size).
MAX_RECORD_BYTES = 1024 * 1024
GT_PREFIX = "gt_compilations/"
JUDGMENT_SCHEMA = "judgment_record.schema.json"
GT_SCHEMA = "gt_compilation.schema.json"



def _metrics() -> list[dict[str, str]]:
    """The metric contract, one row per metric (`assets/rvp_metrics.csv`): name, column of the
    judgments table, axis, and rule (`required`; `explicit_plan`: required iff the case has an
    explicit plan, refused otherwise; `diagnostic`: optional, recorded, never scored). A new
    metric is a new row there (and its weight rows in sql/.../rvp_metric_weights.sql)."""
    with (ASSETS_DIR / "rvp_metrics.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


METRICS = _metrics()
METRIC_COLUMNS: dict[str, str] = {m["metric"]: m["column"] for m in METRICS}
REQUIRED_METRICS = tuple(m["metric"] for m in METRICS if m["rule"] == "required")
PLAN_METRICS = tuple(m["metric"] for m in METRICS if m["rule"] == "explicit_plan")
STAGES = ("gt_compilation", "observer", "vr_vq_judge", "hallucination_auditor", "pi_judge",
          "critic")
STAGE_NO = {name: no for no, name in enumerate(STAGES, start=1)}
CANDIDATE_STAGES = STAGES[1:]

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


@dataclass(frozen=True)
class SourceFile:
    source_file: str  # display name, relative to JUDGMENTS_DIR (posix separators)
    version: int  # 1, 2, ... for successive contents of the same path
    sha256: str  # of the bytes at `path`, as recorded when the version was archived
    path: Path  # where the bytes are (e.g. an archive copy)


@dataclass
class IngestResult:
    judgments: list[dict[str, Any]] = field(default_factory=list)
    hallucinations: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    gt_compilations: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0


# --- reading files into records ------------------------------------------------------------


@dataclass(frozen=True)
class _Record:
    source: SourceFile
    line: int
    raw: str
    obj: Any

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
            yield _Record(sf, rec.line, rec.raw or "", rec.value)


# --- readable reasons ----------------------------------------------------------------------


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((ASSETS_DIR / "schemas" / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _sha(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _show(value: Any, limit: int = 80) -> str:
    """A value as the user wrote it (JSON), shortened: `"80"`, `true`, `101`."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _q(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else _show(value)


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


def _schema_reasons(schema: str, obj: dict[str, Any], own_metrics: bool) -> list[str]:
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


def _metric_reasons(metrics: dict[str, Any], case_id: str, case: CaseInfo | None) -> list[str]:
    reasons = []
    for name, value in metrics.items():
        if name not in METRIC_COLUMNS:
            reasons.append(f"unknown metric {_q(name)}")
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


# --- judgments -----------------------------------------------------------------------------


@dataclass
class _Accepted:
    record: _Record
    sha: str
    same_as: str  # canonical JSON with defaults applied, to tell a rewrite from a repeat


class _Ingest:
    def __init__(self, ctx: EvalContext) -> None:
        self.ctx = ctx
        self.result = IngestResult()
        self.seen: dict[tuple[str, str], _Record] = {}
        self.judgments: dict[tuple[Any, ...], _Accepted] = {}
        self.gts: dict[tuple[Any, ...], _Accepted] = {}
        self._owner: dict[str, str] | None = None

    def owner_of(self, evidence_id: str) -> str | None:
        if self._owner is None:
            self._owner = {eid: ev for ev, ids in self.ctx.evidence_ids.items() for eid in ids}
        return self._owner.get(evidence_id)

    def reject(self, rec: _Record, reasons: Sequence[str]) -> None:
        unique = list(dict.fromkeys(reasons))  # the same sentence twice helps no one
        self.result.rejects.append(_reject(rec.source, rec.line, "; ".join(unique), rec.raw))

    def duplicate(self, rec: _Record, first: _Record, how: str) -> None:
        self.result.duplicates += 1
        self.reject(rec, [f"duplicate of {first.where} ({how}): ignored"])

    def take(self, rec: _Record) -> None:
        is_gt = rec.source.source_file.startswith(GT_PREFIX)
        sha = _sha(rec.obj)
        key = ("gt" if is_gt else "judgment", sha)
        if key in self.seen:
            self.duplicate(rec, self.seen[key], "same content")
            return
        self.seen[key] = rec
        if not isinstance(rec.obj, dict):
            kind = "GT compilation record" if is_gt else "judgment record"
            self.reject(rec, [f"a {kind} must be a JSON object, not {_kind(rec.obj)}"])
        elif is_gt:
            self.take_gt(rec, sha)
        else:
            self.take_judgment(rec, sha)

    def judgment_reasons(self, obj: dict[str, Any]) -> list[str]:
        ctx = self.ctx
        metrics = obj.get("metrics")
        reasons = _schema_reasons(JUDGMENT_SCHEMA, obj, isinstance(metrics, dict))
        reasons += _integer_reasons(obj)
        system, case_id = obj.get("system"), obj.get("case_id")
        known_system = isinstance(system, str) and system in ctx.systems
        if isinstance(system, str) and system and not known_system:
            reasons.append(f"unknown system {_q(system)}")
        case = ctx.cases.get(case_id) if isinstance(case_id, str) else None
        if isinstance(case_id, str) and case_id and case is None:
            reasons.append(f"unknown case {_q(case_id)}")
        cand = None
        if known_system and case is not None:
            cand = ctx.candidates.get((str(system), case_id))
            if cand is None:
                reasons.append(f"no candidate of system {system} for case {case_id}: "
                               "nothing was judged")
        if isinstance(metrics, dict):
            reasons += _metric_reasons(metrics, str(case_id), case)
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
                    owner = self.owner_of(eid)
                    why = f"it is evidence of {owner}" if owner else "no such evidence id"
                    reasons.append(f"evidence id {_q(eid)} does not belong to evaluation "
                                   f"{evaluation_id} ({why})")
        judge = obj.get("judge")
        modality = judge.get("input_modality") if isinstance(judge, dict) else None
        if cand is not None and modality in ("video", "images") and modality != cand.modality:
            reasons.append(f"judge input_modality {_q(modality)} differs from the candidate's "
                           f"modality {_q(cand.modality)}")
        return reasons

    def take_judgment(self, rec: _Record, sha: str) -> None:
        obj = rec.obj
        reasons = self.judgment_reasons(obj)
        identity = (obj.get("system"), obj.get("case_id"), obj.get("judge_run_id"),
                    obj.get("attempt"))
        same_as = canonical_json({"attempt_kind": "initial", **obj})
        well_typed = all(isinstance(v, str | int) and not isinstance(v, bool) for v in identity)
        first = self.judgments.get(identity) if well_typed else None
        if first is not None:
            if not reasons and first.same_as == same_as:
                self.duplicate(rec, first.record, "same content once defaults are applied")
                return
            reasons.append(f"conflicts with {first.record.where}: same system/case/judge_run/"
                           "attempt, different content (send a new attempt instead)")
        if reasons:
            self.reject(rec, reasons)
        else:
            self.judgments[identity] = _Accepted(rec, sha, same_as)

    def take_gt(self, rec: _Record, sha: str) -> None:
        obj = rec.obj
        reasons = _schema_reasons(GT_SCHEMA, obj, own_metrics=False)
        case_id = obj.get("case_id")
        if isinstance(case_id, str) and case_id and case_id not in self.ctx.cases:
            reasons.append(f"unknown case {_q(case_id)}")
        judge = obj.get("judge")
        inner = judge.get("prompt_version") if isinstance(judge, dict) else None
        outer = obj.get("prompt_version")
        if isinstance(inner, str) and isinstance(outer, str) and inner and outer != inner:
            # The fingerprint covers one prompt version; two different ones make it ambiguous.
            reasons.append(f"prompt_version {_q(outer)} differs from judge.prompt_version "
                           f"{_q(inner)}")
        identity = (case_id, obj.get("fingerprint"), obj.get("judge_run_id"))
        first = self.gts.get(identity) if all(isinstance(v, str) for v in identity) else None
        if first is not None:
            reasons.append(f"conflicts with {first.record.where}: same case/fingerprint/"
                           "judge_run, different content")
        if reasons:
            self.reject(rec, reasons)
        else:
            self.gts[identity] = _Accepted(rec, sha, canonical_json(obj))

    # --- rows ------------------------------------------------------------------------------

    def finish(self) -> IngestResult:
        res = self.result
        res.gt_compilations = sorted(
            (self.gt_row(a) for a in self.gts.values()),
            key=lambda r: (r["case_id"], r["fingerprint"], r["judge_run_id"]))
        groups: dict[tuple[str, str, str], list[_Accepted]] = defaultdict(list)
        for acc in self.judgments.values():
            o = acc.record.obj
            groups[(o["system"], o["case_id"], o["judge_run_id"])].append(acc)
        for group, attempts in groups.items():
            final = max(attempts, key=_final_rank)
            for acc in attempts:
                res.judgments.append(self.judgment_row(acc, acc is final))
                res.hallucinations += _hallucination_rows(acc, acc is final, self.ctx)
                res.stages += _stage_rows(acc.record.obj)
            res.stages += self.gt_stage_rows(group, attempts)
        res.judgments.sort(key=lambda r: (r["system"], r["case_id"], r["judge_run_id"],
                                          r["attempt"]))
        res.hallucinations.sort(key=lambda r: (r["system"], r["case_id"], r["judge_run_id"],
                                               r["attempt"], r["hallucination_no"]))
        res.stages.sort(key=lambda r: (r["system"], r["case_id"], r["judge_run_id"],
                                       r["stage_no"], r["attempt"] or 0))
        # Stable sort: rows of one line (none today) keep their processing order.
        res.rejects.sort(key=lambda r: (r["source_file"], r["file_version"],
                                        r["line"] is not None, r["line"] or 0))
        return res

    def gt_row(self, acc: _Accepted) -> dict[str, Any]:
        o, rec = acc.record.obj, acc.record
        return {
            "case_id": o["case_id"], "fingerprint": o["fingerprint"],
            "prompt_version": o["prompt_version"], "judge_run_id": o["judge_run_id"],
            "source_file": rec.source.source_file, "file_version": rec.source.version,
            "line": rec.line, "record_sha256": acc.sha,
            "compilation_json": canonical_json(o["compilation"]),
            "judge_model": o["judge"]["model"], "judge_reasoning": o["judge"]["reasoning"],
            # A changed input or prompt gives a new fingerprint: the old entry no longer applies.
            "is_current": o["fingerprint"] == self.ctx.gt_fingerprints.get(o["case_id"]),
        }

    def judgment_row(self, acc: _Accepted, is_final: bool) -> dict[str, Any]:
        o, rec = acc.record.obj, acc.record
        judge, metrics = o["judge"], o["metrics"]
        return {
            "system": o["system"], "case_id": o["case_id"],
            "evaluation_id": f"{o['system']}/{o['case_id']}",
            "judge_run_id": o["judge_run_id"], "attempt": o["attempt"],
            "attempt_kind": o.get("attempt_kind", "initial"), "is_final": is_final,
            "source_file": rec.source.source_file, "file_version": rec.source.version,
            "line": rec.line, "record_sha256": acc.sha,
            **{col: metrics.get(name) for name, col in METRIC_COLUMNS.items()},
            "n_hallucinations": len(o["hallucinations"]),
            "evidence": list(o["evidence"]),
            "judge_model": judge["model"], "judge_reasoning": judge["reasoning"],
            "prompt_version": judge["prompt_version"], "input_modality": judge["input_modality"],
            "candidate_scope": judge["candidate_scope"],
            "context_sharing": judge["context_sharing"],
            "has_explicit_plan": self.ctx.cases[o["case_id"]].has_explicit_plan,
        }

    def gt_stage_rows(self, group: tuple[str, str, str],
                      attempts: list[_Accepted]) -> list[dict[str, Any]]:
        system, case_id, run = group
        # A run that listed its gt_compilation stage itself has said what happened.
        if any(s.get("stage") == "gt_compilation" for a in attempts
               for s in a.record.obj.get("stages") or ()):
            return []
        current = [r for r in self.result.gt_compilations
                   if r["case_id"] == case_id and r["is_current"]]
        if any(r["judge_run_id"] == run for r in current):
            attempt, kind, status = 1, "initial", "compiled"
        elif current:
            attempt, kind, status = None, "cached", "cached"
        else:
            attempt, kind, status = None, None, "missing"
        return [_stage_row(system, case_id, run, "gt_compilation", attempt, kind, status)]


def _kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _show(value)
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


def _final_rank(acc: _Accepted) -> tuple[bool, int]:
    # A manager review overrides any retry; among equals the latest attempt wins.
    o = acc.record.obj
    return (o.get("attempt_kind") == "manager_review", o["attempt"])


def _hallucination_rows(acc: _Accepted, is_final: bool,
                        ctx: EvalContext) -> list[dict[str, Any]]:
    o = acc.record.obj
    intervals = ctx.cases[o["case_id"]].intervals
    return [{
        "system": o["system"], "case_id": o["case_id"],
        "evaluation_id": f"{o['system']}/{o['case_id']}",
        "judge_run_id": o["judge_run_id"], "attempt": o["attempt"], "is_final": is_final,
        "hallucination_no": no, "entity": h["entity"], "locus": h["locus"],
        "locus_kind": "interval" if h["locus"] in intervals else "step",
        "contradictory_observations": list(h["contradictory_observations"]),
        "affected_chain": h["affected_chain"], "severity": h.get("severity"),
    } for no, h in enumerate(o["hallucinations"], start=1)]


def _stage_row(system: str, case_id: str, run: str, stage: str, attempt: int | None,
               kind: str | None, status: str) -> dict[str, Any]:
    return {"system": system, "case_id": case_id, "evaluation_id": f"{system}/{case_id}",
            "judge_run_id": run, "stage": stage, "stage_no": STAGE_NO[stage],
            "attempt": attempt, "attempt_kind": kind, "status": status}


def _stage_rows(o: dict[str, Any]) -> list[dict[str, Any]]:
    kind = o.get("attempt_kind", "initial")
    key = (o["system"], o["case_id"], o["judge_run_id"])
    if "stages" in o:
        return [_stage_row(*key, s["stage"], s["attempt"], s.get("attempt_kind", kind),
                           s.get("status", "ok")) for s in o["stages"]]
    return [_stage_row(*key, stage, o["attempt"], kind, "ok") for stage in CANDIDATE_STAGES]


def ingest(files: Sequence[SourceFile], ctx: EvalContext) -> IngestResult:
    """Every record of `files` (in the given order; earlier wins) into rows or reject rows."""
    state = _Ingest(ctx)
    for sf in files:
        for item in _read(sf):
            if isinstance(item, _Record):
                state.take(item)
            else:
                state.result.rejects.append(item)
    return state.finish()


# The tables `ingest` fills (raw/<name>), with their schemas
JUDGMENTS_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("evaluation_id", pa.string()),
    ("judge_run_id", pa.string()), ("attempt", pa.int32()), ("attempt_kind", pa.string()),
    ("is_final", pa.bool_()), ("source_file", pa.string()), ("file_version", pa.int32()),
    ("line", pa.int32()), ("record_sha256", pa.string()),
    *[(col, pa.float64()) for col in METRIC_COLUMNS.values()],
    ("n_hallucinations", pa.int32()), ("evidence", pa.list_(pa.string())),
    ("judge_model", pa.string()), ("judge_reasoning", pa.string()),
    ("prompt_version", pa.string()), ("input_modality", pa.string()),
    ("candidate_scope", pa.string()), ("context_sharing", pa.string()),
    ("has_explicit_plan", pa.bool_()),
])
HALLUCINATIONS_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("evaluation_id", pa.string()),
    ("judge_run_id", pa.string()), ("attempt", pa.int32()), ("is_final", pa.bool_()),
    ("hallucination_no", pa.int32()), ("entity", pa.string()), ("locus", pa.string()),
    ("locus_kind", pa.string()), ("contradictory_observations", pa.list_(pa.string())),
    ("affected_chain", pa.string()), ("severity", pa.string()),
])
JUDGMENT_REJECTS_SCHEMA = pa.schema([
    ("source_file", pa.string()), ("file_version", pa.int32()), ("line", pa.int32()),
    ("reason", pa.string()), ("raw", pa.string()),
])
GT_COMPILATIONS_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("fingerprint", pa.string()), ("prompt_version", pa.string()),
    ("judge_run_id", pa.string()), ("source_file", pa.string()), ("file_version", pa.int32()),
    ("line", pa.int32()), ("record_sha256", pa.string()), ("compilation_json", pa.string()),
    ("judge_model", pa.string()), ("is_current", pa.bool_()),
])
STAGES_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("evaluation_id", pa.string()),
    ("judge_run_id", pa.string()), ("stage", pa.string()), ("stage_no", pa.int32()),
    ("attempt", pa.int32()), ("attempt_kind", pa.string()), ("status", pa.string()),
])
JUDGMENT_TABLES = {
    "rvp_judgments": JUDGMENTS_SCHEMA,
    "rvp_hallucinations": HALLUCINATIONS_SCHEMA, "rvp_judgment_rejects": JUDGMENT_REJECTS_SCHEMA,
    "rvp_gt_compilations": GT_COMPILATIONS_SCHEMA, "rvp_stages": STAGES_SCHEMA,
}
