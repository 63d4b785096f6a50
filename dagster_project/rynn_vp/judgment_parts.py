"""Judgment files at campaign scale: each file version read and checked once.

A file version of JUDGMENTS_DIR is read (strict JSON, streamed) and each of its records checked
against the context (`judgment_records.judgment_reasons` / `gt_reasons`) once, into a part
(`parts.PartStore`): per record its line, raw text, digest, the reasons it cannot be accepted,
the keys that tell a repeat from a rewrite and group the attempts, and the rows it makes if it
is accepted (judgment, hallucinations, stages, GT compilation: Arrow structs and lists).
`judgments.write_tables` then replays the parts in file order for what depends on more than one
record (repeats, conflicts, the final attempt), deciding on the keys alone and taking the rows
of the accepted records as they are: no file is parsed, validated or made into rows again. A
part is named for the version, a fingerprint of the context it was checked in (systems, cases,
candidates, evidence ids, GT fingerprints) and `CHECKS_VERSION`, and kept when the context
changes while what its check looked up in it is the same (`judgment_lookups`): a new system, or a
replaced candidate, checks again the files whose records name it, not every file.

The parts live under `$BENCHLAKE_HOME/cache/judgment_parts/`, not under `tables/`: no view reads
them (the judgment tables are what `ingest` makes of them), they only save reading and checking
again, so deleting them costs exactly that.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from dagster_project.dropfolder import copy_deferred
from dagster_project.filecache import Identity
from dagster_project.lifeline import process_pool
from dagster_project.parts import PartStore, digest
from dagster_project.rynn_vp.ingest import refused_cases
from dagster_project.rynn_vp.judgment_lookups import Lookups, as_json, traced
from dagster_project.rynn_vp.judgment_records import (
    METRIC_COLUMNS,
    CandidateInfo,
    CaseInfo,
    EvalContext,
    SourceFile,
    _kind,
    _read,
    _Record,
    canonical_json,
    gt_reasons,
    judgment_reasons,
)
from dagster_project.tables import connect_raw, raw_schema

# Bump when a rule of judgment_records or a row changes: every part is checked again.
CHECKS_VERSION = "3"
GT_PREFIX = "gt_compilations/"
BATCH_ROWS = 2_000
# Checking is CPU work: new file versions are checked by `WORKERS` processes when each gets at
# least this many bytes of them (starting them costs about what checking a few MB does).
PARALLEL_BYTES = 2 * 2**20
WORKERS = 2
BINS_PER_WORKER = 4
FILE_BYTES = 32 * 2**10  # writing a part (one per file version) costs what checking 32 KB does

STAGES = ("gt_compilation", "observer", "vr_vq_judge", "hallucination_auditor", "pi_judge",
          "critic")
STAGE_NO = {name: no for no, name in enumerate(STAGES, start=1)}
CANDIDATE_STAGES = STAGES[1:]

# The tables `judgments.write_tables` fills (raw_<name>), with their schemas
JUDGMENTS_SCHEMA = raw_schema("rvp_judgments")
HALLUCINATIONS_SCHEMA = raw_schema("rvp_hallucinations")
JUDGMENT_REJECTS_SCHEMA = raw_schema("rvp_judgment_rejects")
GT_COMPILATIONS_SCHEMA = raw_schema("rvp_gt_compilations")
STAGES_SCHEMA = raw_schema("rvp_stages")


def _row_type(schema: pa.Schema) -> pa.StructType:
    return pa.struct(list(schema))


# The rows a record makes if it is accepted, by part column (a JSON object or list in the
# part: a few text columns keep a part of one record cheap to write; DuckDB makes them typed
# columns again when the part is read, `judgment_replay.read_parts`).
ROW_COLUMNS = {
    "judgment": _row_type(JUDGMENTS_SCHEMA),
    "hallucinations": pa.list_(_row_type(HALLUCINATIONS_SCHEMA)),
    "stages": pa.list_(_row_type(STAGES_SCHEMA)),
    "gt": _row_type(GT_COMPILATIONS_SCHEMA),
}
# A part: per record its place, raw text, digest and reasons, the keys the replay decides on
# (`ident`: digest of its identity, None if not well typed; `same_as`: digest of the record
# with defaults applied; `lists_gt`: its stages list a gt_compilation), and the rows it makes
# if it is accepted (None when it has a reason: it never is).
PART_SCHEMA = pa.schema([
    ("line", pa.int64()), ("raw", pa.string()), ("problem", pa.string()),
    ("sha", pa.string()), ("reasons", pa.list_(pa.string())), ("is_object", pa.bool_()),
    ("ident", pa.string()), ("same_as", pa.string()), ("lists_gt", pa.bool_()),
    *((name, pa.string()) for name in ROW_COLUMNS),
])
def context_fingerprint(ctx: EvalContext) -> str:
    def norm(value: object) -> object:
        if isinstance(value, frozenset | set):
            return sorted(norm(v) for v in value)
        if isinstance(value, dict):
            return sorted((repr(k), norm(v)) for k, v in value.items())
        if hasattr(value, "__dataclass_fields__"):
            return norm(vars(value))
        return value

    return digest(norm(vars(ctx)))


def judgment_store(cache_dir: Path) -> PartStore:
    """Where the checked parts of judgment file versions are kept (see the module notes)."""
    return PartStore(cache_dir / "judgment_parts", CHECKS_VERSION)


def part_key(store: PartStore, sf: SourceFile, ctx_fingerprint: str) -> str:
    return store.key(f"{sf.source_file}.v{sf.version}", sf.source_file, sf.version, sf.sha256,
                     ctx_fingerprint)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check(rec: _Record, ctx: EvalContext, owner_of: Callable[[str], str | None]
          ) -> dict[str, Any]:
    """The part row of one record: its checks against the context, its keys, its rows."""
    obj = rec.obj
    is_gt = rec.source.source_file.startswith(GT_PREFIX)
    value = canonical_json(obj, rec.sorted_text)
    row: dict[str, Any] = {"line": rec.line, "raw": rec.raw, "sha": _sha(value),
                           "is_object": isinstance(obj, dict)}
    if not isinstance(obj, dict):
        kind = "GT compilation record" if is_gt else "judgment record"
        row["reasons"] = [f"a {kind} must be a JSON object, not {_kind(obj)}"]
        return row
    if is_gt:
        reasons = gt_reasons(obj, ctx)
        identity = (obj.get("case_id"), obj.get("fingerprint"), obj.get("judge_run_id"))
        if all(isinstance(v, str) for v in identity):
            row["ident"] = _sha(canonical_json(identity))
        if not reasons:
            row["gt"] = _json(gt_row(rec, row["sha"], ctx))
    else:
        reasons = judgment_reasons(obj, ctx, owner_of)
        identity = (obj.get("system"), obj.get("case_id"), obj.get("judge_run_id"),
                    obj.get("attempt"))
        if all(isinstance(v, str | int) and not isinstance(v, bool) for v in identity):
            row["ident"] = _sha(canonical_json(identity))
        if not reasons:
            row["same_as"] = _sha(_without_default_kind(obj, value))
            row["lists_gt"] = any(s.get("stage") == "gt_compilation"
                                  for s in obj.get("stages") or ())
            row["judgment"] = _json(judgment_row(rec, row["sha"], ctx))
            row["hallucinations"] = _json(_hallucination_rows(obj, ctx))
            row["stages"] = _json(_stage_rows(obj))
    row["reasons"] = reasons
    return row


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _without_default_kind(obj: dict[str, Any], value: str) -> str:
    """The canonical JSON of an accepted judgment without `"attempt_kind": "initial"` (the
    default, written out or not: one and the same record). Its sorted keys start with
    `attempt`, `attempt_kind`: cut from `value`, not written again, when they do."""
    if obj.get("attempt_kind") != "initial":
        return value
    head = f'{{"attempt":{obj["attempt"]},"attempt_kind":"initial",'
    if value.startswith(head):
        return f'{{"attempt":{obj["attempt"]},' + value[len(head):]
    return canonical_json({k: v for k, v in obj.items() if k != "attempt_kind"})


def write_part(sf: SourceFile, ctx: EvalContext, owner_of, store: PartStore, key: str
               ) -> tuple[int, list[list[Any]]]:
    """Read and check one file version into part `key`; the number of rows, and what the checks
    looked up in the context (`judgment_lookups`)."""
    n = 0
    ctx, owner_of, seen = traced(ctx, owner_of)
    with store.streaming(key, PART_SCHEMA, read_whole=True) as out:  # read only by the replay
        rows: list[dict] = []
        for item in _read(sf):
            if isinstance(item, _Record):
                rows.append(check(item, ctx, owner_of))
            else:
                rows.append({"line": item["line"], "raw": item["raw"],
                             "problem": item["reason"]})
            if len(rows) == BATCH_ROWS:
                out.write(pa.Table.from_pylist(rows, schema=PART_SCHEMA))
                n, rows = n + len(rows), []
        out.write(pa.Table.from_pylist(rows, schema=PART_SCHEMA))
        n += len(rows)
    return n, as_json(seen)


class Incomplete(Exception):
    """A file version was rewritten or removed since its folder was listed: it has no part
    (list the folder again)."""


class CheckedParts(Mapping[SourceFile, Path]):
    """The part of every file version (`check_parts`): each path at once, the rows of one
    checked now once its bin is (`rows`), so that the parts before it can be replayed while the
    rest are checked."""

    def __init__(self, paths: dict[SourceFile, Path], bins: Sequence[tuple[Any, list]]) -> None:
        self.paths = paths
        self._bins = bins  # (a Future of `_write_parts` or its result, the versions)
        self._bin_of = {sf: i for i, (_, sfs) in enumerate(bins) for sf in sfs}
        self._done: dict[int, dict[str, int]] = {}
        self._lookups: dict[str, list[list[Any]]] = {}

    def __getitem__(self, sf: SourceFile) -> Path:
        return self.paths[sf]

    def __iter__(self) -> Iterator[SourceFile]:
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)

    def checked_now(self, sf: SourceFile) -> bool:
        return sf in self._bin_of

    def rows(self, sf: SourceFile) -> int:
        """The rows of the part of `sf`, checked now (waits for its bin): `Incomplete` if the
        file changed since it was listed."""
        rows = self._result(self._bin_of[sf]).get(self.paths[sf].stem)
        if rows is None:
            raise Incomplete(f"{sf.source_file} changed since its folder was listed")
        return rows

    def written(self) -> list[str]:
        """The keys written now (waits for every bin)."""
        return [key for i in range(len(self._bins)) for key in self._result(i)]

    def lookups(self) -> dict[str, list[list[Any]]]:
        """What the check of each part written now looked up (waits for every bin)."""
        self.written()
        return self._lookups

    def _result(self, i: int) -> dict[str, int]:
        if i not in self._done:
            job = self._bins[i][0]
            done = job if isinstance(job, list) else job.result()
            self._done[i] = {key: rows for key, rows, _ in done}
            self._lookups.update((key, seen) for key, _, seen in done)
        return self._done[i]


@contextmanager
def check_parts(store: PartStore, files: Sequence[SourceFile], ctx: EvalContext,
                copies: Mapping[str, tuple[Path, Identity]] | None = None
                ) -> Iterator[CheckedParts]:
    """The part of every file version, written now if missing: the part a version was checked
    into is kept while what its check looked up in `ctx` is unchanged (`judgment_lookups`),
    else it is checked again; parts no longer wanted are removed. From `PARALLEL_BYTES` of new
    versions on, they are checked by up to `WORKERS` processes in about `BINS_PER_WORKER` times
    as many bins (`_bins`), of whole files in file order, even in cost (a part costs what
    checking `FILE_BYTES` does; a larger file is a bin of its own):
    the block reads the parts of a bin once it is done, while the next ones are checked
    (`judgments.write_tables` replays them; the bins still running when it ends are waited
    for). `copies`: the versions (by archived path) still to be copied into the archive from
    their drop-folder file (`dropfolder.archive_versions(deferred=…)`), each copied by the
    process that checks it; one whose file was rewritten or removed since the folder's scan
    gets no part and no archive copy (`complete` tells)."""
    owner: dict[str, str] = {}
    for ev, ids in ctx.evidence_ids.items():
        for eid in ids:
            owner[eid] = ev
    lookups = Lookups(store.folder, store.code_version, ctx, owner)
    fingerprint = context_fingerprint(ctx)
    keys = {}
    for sf in files:
        kept = lookups.part_of(sf)
        keys[sf] = kept if kept is not None and store.has(kept) else \
            part_key(store, sf, fingerprint)
    store.keep(keys.values())
    paths = {sf: store.path(key) for sf, key in keys.items()}
    copies = copies or {}
    todo = []
    for sf, key in keys.items():
        copy = copies.get(str(sf.path))
        if not store.has(key):
            todo.append((sf, key, copy))
        else:  # checked before, but not archived (the archive lost it)
            copy_deferred(sf.path, sf.sha256, copy)
    costs = [(copy[1].size if copy else sf.path.stat().st_size) + FILE_BYTES
             for sf, _, copy in todo]
    total = sum(costs)
    if total < PARALLEL_BYTES:  # starting a process costs more
        parts = CheckedParts(paths, [(_write_parts((ctx, owner, store, todo)),
                                      [sf for sf, _, _ in todo])] if todo else [])
        yield parts
        lookups.save(keys, parts.lookups())
        return
    workers = min(WORKERS, os.cpu_count() or 1, len(todo), total // max(PARALLEL_BYTES, 1))
    bins = _bins(todo, costs, total / min(workers * BINS_PER_WORKER, len(todo)))
    with process_pool(workers) as pool:
        futures = [pool.submit(_write_parts, (ctx, owner, store, b)) for b in bins]
        try:
            parts = CheckedParts(paths, [(f, [sf for sf, _, _ in b])
                                         for f, b in zip(futures, bins, strict=True)])
            yield parts
            lookups.save(keys, parts.lookups())
        finally:
            for f in futures:
                f.cancel()


def _bins(jobs: Sequence[Any], costs: Sequence[int], target: float) -> list[list]:
    """`jobs` in order, cut into bins of about `target` cost: a bin ends before a job that would
    take it over, so a large file is a bin of its own and its part is replayed once it alone is
    checked (not once the file after it is too)."""
    bins: list[list] = [[]]
    held = 0
    for job, cost in zip(jobs, costs, strict=True):
        if bins[-1] and held + cost > target:
            bins.append([])
            held = 0
        bins[-1].append(job)
        held += cost
    return bins


def sync_parts(store: PartStore, files: Sequence[SourceFile], ctx: EvalContext,
               copies: Mapping[str, tuple[Path, Identity]] | None = None
               ) -> tuple[dict[SourceFile, Path], list[str]]:
    """`check_parts` waited for: the part of every file version, and the keys written now."""
    with check_parts(store, files, ctx, copies) as parts:
        written = parts.written()
    return dict(parts.paths), written


def complete(parts: Mapping[SourceFile, Path]) -> bool:
    """Whether every version of `sync_parts`' result is archived and has its part (False: a
    file was rewritten or removed after its folder was listed; list it again)."""
    return all(sf.path.exists() and part.exists() for sf, part in parts.items())


def _write_parts(job: tuple[EvalContext, dict[str, str], PartStore, list]
                 ) -> list[tuple[str, int, list]]:
    """Archive (if left to do) and check each file version of `job` into its part; the keys
    written, with their rows and lookups (a version whose file changed since the scan: none, no
    part)."""
    ctx, owner, store, todo = job
    return [(key, *write_part(sf, ctx, owner.get, store, key)) for sf, key, copy in todo
            if copy_deferred(sf.path, sf.sha256, copy)]


# The raw tables a judgment is checked against (their assets are the judgments' dependencies).
CONTEXT_INPUTS = ("rvp_cases", "rvp_intervals", "rvp_candidates", "rvp_evidence_frames",
                  "rvp_storyboards", "rvp_gt_fingerprints")


def eval_context(home: Path) -> EvalContext:
    """What a judgment is checked against, from the raw tables `CONTEXT_INPUTS`."""
    con = connect_raw(home, CONTEXT_INPUTS)
    cases: dict[str, list] = {}
    for case_id, plan in con.execute("SELECT case_id, has_explicit_plan FROM raw.rvp_cases"
                                     ).fetchall():
        cases[case_id] = [plan, set()]
    for case_id, interval in con.execute("SELECT case_id, \"interval\" FROM raw.rvp_intervals"
                                         ).fetchall():
        cases[case_id][1].add(interval)
    candidates = {
        (s, c): CandidateInfo(m, frozenset(steps or []))
        for s, c, m, steps in con.execute(
            "SELECT system, case_id, modality, step_ids FROM raw.rvp_candidates").fetchall()}
    evidence: dict[str, set[str]] = {}
    for ev, eid in con.execute("SELECT evaluation_id, evidence_id FROM raw.rvp_evidence_frames "
                               "UNION ALL SELECT evaluation_id, evaluation_id || '#SB' || "
                               "storyboard_no FROM raw.rvp_storyboards").fetchall():
        evidence.setdefault(ev, set()).add(eid)
    prints = dict(con.execute("SELECT case_id, fingerprint FROM raw.rvp_gt_fingerprints"
                              ).fetchall())
    con.close()
    return EvalContext(
        systems=frozenset(s for s, _ in candidates),
        cases={c: CaseInfo(bool(p), frozenset(i)) for c, (p, i) in cases.items()},
        candidates=candidates,
        evidence_ids={k: frozenset(v) for k, v in evidence.items()},
        gt_fingerprints=prints,
        refused=refused_cases(home),
    )


# --- the rows of an accepted record ------------------------------------------------------------


def gt_row(rec: _Record, sha: str, ctx: EvalContext) -> dict[str, Any]:
    o = rec.obj
    return {
        "case_id": o["case_id"], "fingerprint": o["fingerprint"],
        "prompt_version": o["prompt_version"], "judge_run_id": o["judge_run_id"],
        "source_file": rec.source.source_file, "file_version": rec.source.version,
        "line": rec.line, "record_sha256": sha,
        "compilation_json": canonical_json(o["compilation"]),
        # the judge's reasoning level is not a column of rvp_gt_compilations (judge_model
        # is what tells compilations apart); it was never stored
        "judge_model": o["judge"]["model"],
        # A changed input or prompt gives a new fingerprint: the old entry no longer applies.
        "is_current": o["fingerprint"] == ctx.gt_fingerprints.get(o["case_id"]),
    }


def judgment_row(rec: _Record, sha: str, ctx: EvalContext) -> dict[str, Any]:
    """The row of an accepted judgment (which attempt is final is `stg_rvp_judgments`')."""
    o = rec.obj
    judge, metrics = o["judge"], o["metrics"]
    return {
        "system": o["system"], "case_id": o["case_id"],
        "evaluation_id": f"{o['system']}/{o['case_id']}",
        "judge_run_id": o["judge_run_id"], "attempt": o["attempt"],
        "attempt_kind": o.get("attempt_kind", "initial"),
        "source_file": rec.source.source_file, "file_version": rec.source.version,
        "line": rec.line, "record_sha256": sha,
        **{col: metrics.get(name) for name, col in METRIC_COLUMNS.items()},
        "n_hallucinations": len(o["hallucinations"]),
        "evidence": list(o["evidence"]),
        "judge_model": judge["model"], "judge_reasoning": judge["reasoning"],
        "prompt_version": judge["prompt_version"], "input_modality": judge["input_modality"],
        "candidate_scope": judge["candidate_scope"],
        "context_sharing": judge["context_sharing"],
        "has_explicit_plan": ctx.cases[o["case_id"]].has_explicit_plan,
        "review_author": o.get("review", {}).get("author"),
        "review_reason": o.get("review", {}).get("reason"),
    }


def _hallucination_rows(o: dict[str, Any], ctx: EvalContext) -> list[dict[str, Any]]:
    """The hallucination rows of an accepted judgment."""
    intervals = ctx.cases[o["case_id"]].intervals
    return [{
        "system": o["system"], "case_id": o["case_id"],
        "evaluation_id": f"{o['system']}/{o['case_id']}",
        "judge_run_id": o["judge_run_id"], "attempt": o["attempt"],
        "hallucination_no": no, "entity": h["entity"], "locus": h["locus"],
        "locus_kind": "interval" if h["locus"] in intervals else "step",
        "contradictory_observations": list(h["contradictory_observations"]),
        "affected_chain": h["affected_chain"], "severity": h.get("severity"),
    } for no, h in enumerate(o["hallucinations"], start=1)]


def stage_row(system: str, case_id: str, run: str, stage: str, attempt: int | None,
              kind: str | None, status: str) -> dict[str, Any]:
    return {"system": system, "case_id": case_id, "evaluation_id": f"{system}/{case_id}",
            "judge_run_id": run, "stage": stage, "stage_no": STAGE_NO[stage],
            "attempt": attempt, "attempt_kind": kind, "status": status}


def gt_stage_row(group: tuple[str, str, str], current_runs: set[str]) -> dict[str, Any]:
    """The gt_compilation stage of an evaluation in a judge run whose attempts did not list it:
    `current_runs` are the judge runs with a current GT compilation of its case."""
    system, case_id, run = group
    if run in current_runs:
        attempt, kind, status = 1, "initial", "compiled"
    elif current_runs:
        attempt, kind, status = None, "cached", "cached"
    else:
        attempt, kind, status = None, None, "missing"
    return stage_row(system, case_id, run, "gt_compilation", attempt, kind, status)


def _stage_rows(o: dict[str, Any]) -> list[dict[str, Any]]:
    kind = o.get("attempt_kind", "initial")
    key = (o["system"], o["case_id"], o["judge_run_id"])
    if "stages" in o:
        return [stage_row(*key, s["stage"], s["attempt"], s.get("attempt_kind", kind),
                          s.get("status", "ok")) for s in o["stages"]]
    return [stage_row(*key, stage, o["attempt"], kind, "ok") for stage in CANDIDATE_STAGES]
