"""Judgment records and recorded GT compilations into rows, with nothing lost or silently altered.

Input: the successive versions of the files in `JUDGMENTS_DIR` (`*.json`: one record or an array
of records; `*.jsonl`: one record per non-blank line). Files under `gt_compilations/` hold GT
compilation records, every other file judgment records; both are read and checked as
`judgment_records.py` describes.

Every record ends up in exactly one place: an accepted row, or a reject row that says why and
keeps the raw text. Repeated records are ignored (and listed), and an accepted judgment is never
replaced: a different record with the same system/case/judge run/attempt is refused, because the
judge must send a new attempt instead of rewriting history. Among the accepted attempts of one
judge run the final one is marked; the stages each run went through become rows too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster_project.rynn_vp.judgment_parts import GT_PREFIX, Checked, check, read_parts
from dagster_project.rynn_vp.judgment_records import (
    METRIC_COLUMNS,
    EvalContext,
    SourceFile,
    _kind,
    _read,
    _Record,
    _reject,
    canonical_json,
)
from dagster_project.tables import raw_schema

STAGES = ("gt_compilation", "observer", "vr_vq_judge", "hallucination_auditor", "pi_judge",
          "critic")
STAGE_NO = {name: no for no, name in enumerate(STAGES, start=1)}
CANDIDATE_STAGES = STAGES[1:]


@dataclass
class IngestResult:
    judgments: list[dict[str, Any]] = field(default_factory=list)
    hallucinations: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    gt_compilations: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0


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

    def take(self, rec: _Record, checked: Checked | None = None) -> None:
        """One record, in file order; `checked`: its context checks, done before (a part)."""
        is_gt = rec.source.source_file.startswith(GT_PREFIX)
        if checked is None:
            checked = check(rec, self.ctx, self.owner_of)
        key = ("gt" if is_gt else "judgment", checked.sha)
        if key in self.seen:
            self.duplicate(rec, self.seen[key], "same content")
            return
        self.seen[key] = rec
        if not isinstance(rec.obj, dict):
            kind = "GT compilation record" if is_gt else "judgment record"
            self.reject(rec, [f"a {kind} must be a JSON object, not {_kind(rec.obj)}"])
        elif is_gt:
            self.take_gt(rec, checked)
        else:
            self.take_judgment(rec, checked)

    def take_judgment(self, rec: _Record, checked: Checked) -> None:
        obj, sha, same_as = rec.obj, checked.sha, checked.same_as
        reasons = list(checked.reasons)
        identity = (obj.get("system"), obj.get("case_id"), obj.get("judge_run_id"),
                    obj.get("attempt"))
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

    def take_gt(self, rec: _Record, checked: Checked) -> None:
        obj, sha = rec.obj, checked.sha
        reasons = list(checked.reasons)
        case_id = obj.get("case_id")
        identity = (case_id, obj.get("fingerprint"), obj.get("judge_run_id"))
        first = self.gts.get(identity) if all(isinstance(v, str) for v in identity) else None
        if first is not None:
            reasons.append(f"conflicts with {first.record.where}: same case/fingerprint/"
                           "judge_run, different content")
        if reasons:
            self.reject(rec, reasons)
        else:
            self.gts[identity] = _Accepted(rec, sha, checked.same_as or canonical_json(obj))

    # --- rows ------------------------------------------------------------------------------

    def finish(self) -> IngestResult:
        res = self.result
        res.gt_compilations = sorted(
            (self.gt_row(a) for a in self.gts.values()),
            key=lambda r: (r["case_id"], r["fingerprint"], r["judge_run_id"]))
        current: dict[str, set[str]] = defaultdict(set)  # case → judge runs of current GTs
        for r in res.gt_compilations:
            if r["is_current"]:
                current[r["case_id"]].add(r["judge_run_id"])
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
            res.stages += gt_stage_rows(group, attempts, current.get(group[1], set()))
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
            # the judge's reasoning level is not a column of rvp_gt_compilations (judge_model
            # is what tells compilations apart); it was never stored
            "judge_model": o["judge"]["model"],
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



def gt_stage_rows(group: tuple[str, str, str], attempts: list[_Accepted],
                  current_runs: set[str]) -> list[dict[str, Any]]:
    """The gt_compilation stage of an evaluation in a judge run: `current_runs` are the judge
    runs with a current GT compilation of its case."""
    system, case_id, run = group
    # A run that listed its gt_compilation stage itself has said what happened.
    if any(s.get("stage") == "gt_compilation" for a in attempts
           for s in a.record.obj.get("stages") or ()):
        return []
    if run in current_runs:
        attempt, kind, status = 1, "initial", "compiled"
    elif current_runs:
        attempt, kind, status = None, "cached", "cached"
    else:
        attempt, kind, status = None, None, "missing"
    return [_stage_row(system, case_id, run, "gt_compilation", attempt, kind, status)]


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


def ingest(files: Sequence[SourceFile], ctx: EvalContext,
           parts: Mapping[SourceFile, Path] | None = None) -> IngestResult:
    """Every record of `files` (in the given order; earlier wins) into rows or reject rows.
    With `parts` (`judgment_parts.sync_parts`), a file version is replayed from its part: read
    and checked before, against this same context."""
    state = _Ingest(ctx)
    if parts is not None:
        items = read_parts([(sf, parts[sf]) for sf in files])
    else:
        items = (item if isinstance(item, dict) else (item, None)
                 for sf in files for item in _read(sf))
    for item in items:
        if isinstance(item, dict):
            state.result.rejects.append(item)
        else:
            state.take(*item)
    return state.finish()


# The tables `ingest` fills (raw_<name>), with their schemas
JUDGMENTS_SCHEMA = raw_schema("rvp_judgments")
HALLUCINATIONS_SCHEMA = raw_schema("rvp_hallucinations")
JUDGMENT_REJECTS_SCHEMA = raw_schema("rvp_judgment_rejects")
GT_COMPILATIONS_SCHEMA = raw_schema("rvp_gt_compilations")
STAGES_SCHEMA = raw_schema("rvp_stages")
JUDGMENT_TABLES = {
    "rvp_judgments": JUDGMENTS_SCHEMA,
    "rvp_hallucinations": HALLUCINATIONS_SCHEMA, "rvp_judgment_rejects": JUDGMENT_REJECTS_SCHEMA,
    "rvp_gt_compilations": GT_COMPILATIONS_SCHEMA, "rvp_stages": STAGES_SCHEMA,
}
