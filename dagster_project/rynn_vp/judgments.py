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

Memory is bounded by a batch, not by the records: the records are replayed from their parts
`BATCH_ROWS` at a time, each made into its rows at once (spilled to disk in that batch), and
only what decides later records stays in memory, a few hundred bytes per record: the digest
of every record read and the place of its first sight, the identity of every accepted record,
and per (system, case, judge run) its best attempt so far. `is_final` and the gt_compilation
stage rows are known at the end; DuckDB then sorts the keys of each spilled table within
`SORT_MEMORY` (the rest on disk), fetches its rows in that order a slice at a time
(`SLICE_BYTES`), and it is written row group by row group (`ROW_GROUP_ROWS`,
fewer if wide):
a smaller table has exactly the bytes `tables.write_table` gives it, a larger one the same rows
in more row groups, equal inputs always equal bytes.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.rynn_vp.judgment_parts import (
    BATCH_ROWS,
    GT_PREFIX,
    Checked,
    check,
    read_parts,
)
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
from dagster_project.tables import raw_schema, rows_to_table, streaming_parquet, write_table

STAGES = ("gt_compilation", "observer", "vr_vq_judge", "hallucination_auditor", "pi_judge",
          "critic")
STAGE_NO = {name: no for no, name in enumerate(STAGES, start=1)}
CANDIDATE_STAGES = STAGES[1:]

# The tables `write_tables` fills (raw_<name>), with their schemas
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
# How each table is sorted. `_seq` numbers the records in file order, `_k` the rows one record
# makes: they break ties as the order of reading did (rows of one line; stages of one attempt).
ORDER_BY = {
    "rvp_judgments": "system, case_id, judge_run_id, attempt",
    "rvp_hallucinations": "system, case_id, judge_run_id, attempt, hallucination_no",
    "rvp_judgment_rejects": "source_file, file_version, line IS NOT NULL, coalesce(line, 0), _seq",
    "rvp_gt_compilations": "case_id, fingerprint, judge_run_id",
    "rvp_stages": "system, case_id, judge_run_id, stage_no, coalesce(attempt, 0), _seq, _k",
}
# A written table's row groups: at most this many rows, closed sooner at this many bytes; what
# is held to write one. A smaller table is one row group, as `tables.write_table` writes it.
ROW_GROUP_ROWS = 16_384
ROW_GROUP_BYTES = 32 * 2**20
SORT_MEMORY = "128MB"  # DuckDB's memory for sorting a table; beyond it, it sorts on disk
SLICE_BYTES = 2 * 2**20  # the rows of a table are sorted about this much at a time (whole batches)
_AFTER_ALL = 2**62  # `_seq` of the gt_compilation stage rows, made once every record is read
_LINE_BITS = 32  # a place (file version, line) packed into one int: version index, then line


@dataclass
class IngestResult:
    """The rows of every table (`ingest`: small inputs, tests and notebooks)."""

    judgments: list[dict[str, Any]] = field(default_factory=list)
    hallucinations: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    gt_compilations: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0


@dataclass(frozen=True)
class Written:
    """What `write_tables` wrote: rows per table, and the repeated records it ignored."""

    rows: dict[str, int]
    duplicates: int


@dataclass(slots=True)
class _Group:
    """The accepted attempts of one (system, case, judge run), as far as the rest needs."""

    best: tuple[bool, int]  # the final attempt's rank so far (`_final_rank`)
    best_seq: int  # ... and its record
    lists_gt_stage: bool  # an attempt listed its gt_compilation stage itself


class _Spill:
    """The rows of one table in the order they are made, plus the columns that sort them,
    written to `path` every `BATCH_ROWS` rows."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path, self.schema, self.rows, self.count = path, schema, [], 0
        self.writer = pq.ParquetWriter(path, schema, compression="zstd", compression_level=1)

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.count += 1
        if len(self.rows) == BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(rows_to_table(self.rows, self.schema))
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _spill_schema(name: str) -> pa.Schema:
    # is_final is known at the end (from `_seq`); the sort columns are dropped when written
    fields = [f for f in JUDGMENT_TABLES[name] if f.name != "is_final"]
    return pa.schema([*fields, pa.field("_seq", pa.int64()), pa.field("_k", pa.int64())])


def _digest(value: Any) -> bytes:
    return hashlib.sha256(canonical_json(value).encode()).digest()


class _Ingest:
    def __init__(self, ctx: EvalContext, files: Sequence[SourceFile], work: Path) -> None:
        self.ctx = ctx
        self.files = list(files)
        self.index = {sf: i for i, sf in enumerate(self.files)}
        self.spills = {name: _Spill(work / f"{name}.spill.parquet", _spill_schema(name))
                       for name in JUDGMENT_TABLES}
        self.duplicates = 0
        self.seq = 0  # the item being taken, in file order
        # What decides later records, compactly: record digest + kind -> where first seen;
        # identity digest -> (where, digest of the record with defaults applied).
        self.seen: dict[bytes, int] = {}
        self.judgments: dict[bytes, tuple[int, bytes]] = {}
        self.gts: dict[bytes, int] = {}
        self.groups: dict[tuple[str, str, str], _Group] = {}
        self.current: dict[str, set[str]] = defaultdict(set)  # case -> runs of current GTs
        self._owner: dict[str, str] | None = None

    def owner_of(self, evidence_id: str) -> str | None:
        if self._owner is None:
            self._owner = {eid: ev for ev, ids in self.ctx.evidence_ids.items() for eid in ids}
        return self._owner.get(evidence_id)

    def where(self, rec: _Record) -> int:
        return (self.index[rec.source] << _LINE_BITS) | rec.line

    def where_text(self, where: int) -> str:
        sf = self.files[where >> _LINE_BITS]
        return f"{sf.source_file} v{sf.version} line {where & ((1 << _LINE_BITS) - 1)}"

    def add(self, name: str, row: dict[str, Any], k: int = 0) -> None:
        self.spills[name].add({**row, "_seq": self.seq, "_k": k})

    def problem(self, row: dict[str, Any]) -> None:
        """A reject row of the reader (unreadable record or file)."""
        self.seq += 1
        self.add("rvp_judgment_rejects", row)

    def reject(self, rec: _Record, reasons: Sequence[str]) -> None:
        unique = list(dict.fromkeys(reasons))  # the same sentence twice helps no one
        self.add("rvp_judgment_rejects",
                 _reject(rec.source, rec.line, "; ".join(unique), rec.raw))

    def duplicate(self, rec: _Record, first: int, how: str) -> None:
        self.duplicates += 1
        self.reject(rec, [f"duplicate of {self.where_text(first)} ({how}): ignored"])

    def take(self, rec: _Record, checked: Checked | None = None) -> None:
        """One record, in file order; `checked`: its context checks, done before (a part)."""
        self.seq += 1
        is_gt = rec.source.source_file.startswith(GT_PREFIX)
        if checked is None:
            checked = check(rec, self.ctx, self.owner_of)
        key = bytes.fromhex(checked.sha) + (b"g" if is_gt else b"j")
        first = self.seen.get(key)
        if first is not None:
            self.duplicate(rec, first, "same content")
            return
        self.seen[key] = self.where(rec)
        if not isinstance(rec.obj, dict):
            kind = "GT compilation record" if is_gt else "judgment record"
            self.reject(rec, [f"a {kind} must be a JSON object, not {_kind(rec.obj)}"])
        elif is_gt:
            self.take_gt(rec, checked)
        else:
            self.take_judgment(rec, checked)

    def take_judgment(self, rec: _Record, checked: Checked) -> None:
        obj = rec.obj
        same_as = hashlib.sha256((checked.same_as or "").encode()).digest()
        reasons = list(checked.reasons)
        identity = (obj.get("system"), obj.get("case_id"), obj.get("judge_run_id"),
                    obj.get("attempt"))
        well_typed = all(isinstance(v, str | int) and not isinstance(v, bool) for v in identity)
        ident = _digest(identity)
        first = self.judgments.get(ident) if well_typed else None
        if first is not None:
            if not reasons and first[1] == same_as:
                self.duplicate(rec, first[0], "same content once defaults are applied")
                return
            reasons.append(f"conflicts with {self.where_text(first[0])}: same system/case/"
                           "judge_run/attempt, different content (send a new attempt instead)")
        if reasons:
            self.reject(rec, reasons)
            return
        self.judgments[ident] = (self.where(rec), same_as)
        group = tuple(sys.intern(obj[k]) for k in ("system", "case_id", "judge_run_id"))
        rank = _final_rank(obj)
        lists_gt = any(s.get("stage") == "gt_compilation" for s in obj.get("stages") or ())
        g = self.groups.get(group)
        if g is None:
            self.groups[group] = _Group(rank, self.seq, lists_gt)
        else:
            if rank > g.best:  # among equals the first stays (as `max` would keep it)
                g.best, g.best_seq = rank, self.seq
            g.lists_gt_stage |= lists_gt
        self.add("rvp_judgments", self.judgment_row(rec, checked.sha))
        for row in _hallucination_rows(obj, self.ctx):
            self.add("rvp_hallucinations", row)
        for k, row in enumerate(_stage_rows(obj)):
            self.add("rvp_stages", row, k)

    def take_gt(self, rec: _Record, checked: Checked) -> None:
        obj = rec.obj
        reasons = list(checked.reasons)
        case_id = obj.get("case_id")
        identity = (case_id, obj.get("fingerprint"), obj.get("judge_run_id"))
        ident = _digest(identity)
        first = self.gts.get(ident) if all(isinstance(v, str) for v in identity) else None
        if first is not None:
            reasons.append(f"conflicts with {self.where_text(first)}: same case/fingerprint/"
                           "judge_run, different content")
        if reasons:
            self.reject(rec, reasons)
            return
        self.gts[ident] = self.where(rec)
        row = self.gt_row(rec, checked.sha)
        if row["is_current"]:
            self.current[row["case_id"]].add(row["judge_run_id"])
        self.add("rvp_gt_compilations", row)

    # --- rows ------------------------------------------------------------------------------

    def finish(self, out: Mapping[str, Path], work: Path) -> Written:
        """The rows known only once every record is read, then every table sorted into `out`."""
        self.seq = _AFTER_ALL
        for group, g in self.groups.items():
            if not g.lists_gt_stage:
                self.add("rvp_stages", gt_stage_row(group, self.current.get(group[1], set())))
        finals = pa.table({"seq": sorted(g.best_seq for g in self.groups.values())},
                          schema=pa.schema([("seq", pa.int64())]))
        self.groups.clear()
        self.seen.clear()
        self.judgments.clear()
        self.gts.clear()
        for spill in self.spills.values():
            spill.close()
        _release_freed_memory()  # the index's pages, before DuckDB takes its own
        rows = {}
        for name, schema in JUDGMENT_TABLES.items():
            # a connection per table: what DuckDB kept for one sort is freed before the next
            con = duckdb.connect(":memory:", config={
                "python_enable_replacements": False, "memory_limit": SORT_MEMORY, "threads": 1,
                "temp_directory": str(work / "sort")})
            try:
                con.register("finals", finals)
                rows[name] = _write_sorted(con, self.spills[name], out[name], schema,
                                           ORDER_BY[name])
            finally:
                con.close()
        return Written(rows, self.duplicates)

    def gt_row(self, rec: _Record, sha: str) -> dict[str, Any]:
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
            "is_current": o["fingerprint"] == self.ctx.gt_fingerprints.get(o["case_id"]),
        }

    def judgment_row(self, rec: _Record, sha: str) -> dict[str, Any]:
        """The row of an accepted judgment, `is_final` aside (known at the end)."""
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
            "has_explicit_plan": self.ctx.cases[o["case_id"]].has_explicit_plan,
        }


def _write_sorted(con: duckdb.DuckDBPyConnection, spill: _Spill, path: Path,
                  schema: pa.Schema, order_by: str) -> int:
    """The spilled rows sorted into table `path` (`is_final`: the record is a group's final
    attempt), `ROW_GROUP_ROWS` rows per row group, each written from one contiguous table so
    that equal rows give equal bytes; the number of rows.

    Only the sort keys are sorted whole (into each row's position); the rows themselves are
    then sorted a slice of positions at a time (`SLICE_BYTES` of them, in whole `BATCH_ROWS`),
    each fetched by a join on its positions: DuckDB never holds more than a slice of wide rows,
    and the batches are those one sort of every row would give."""
    if spill.count == 0:
        write_table(schema.empty_table(), path)
        return 0
    columns = ", ".join("s._seq IN (SELECT seq FROM finals) AS is_final" if n == "is_final"
                        else f's."{n}"' for n in schema.names)
    spilled = "read_parquet(?, file_row_number = true) AS s"
    # a table keeps the order it is filled in: row `rowid` of `positions` is the rowid-th
    con.execute(f"CREATE OR REPLACE TEMP TABLE positions AS SELECT s.file_row_number AS r "
                f"FROM {spilled} ORDER BY {order_by}", [str(spill.path)])
    meta = pq.ParquetFile(spill.path).metadata
    row_bytes = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    row_bytes = max(1, row_bytes // spill.count)
    step = max(1, SLICE_BYTES // (row_bytes * BATCH_ROWS)) * BATCH_ROWS
    readers = (con.sql(f"SELECT {columns} FROM {spilled} JOIN (SELECT rowid AS pos, r FROM "
                       "positions WHERE rowid >= ? AND rowid < ?) AS p ON s.file_row_number = p.r "
                       "ORDER BY p.pos",
                       params=[str(spill.path), lo, lo + step]).to_arrow_reader(BATCH_ROWS)
               for lo in range(0, spill.count, step))
    pending: list[pa.RecordBatch] = []
    held = 0
    with streaming_parquet(path, schema) as writer:
        for batch in chain(chain.from_iterable(readers), [None]):
            if batch is not None:
                pending.append(batch.cast(schema))
                held += batch.num_rows
            # wide rows (a reject keeps up to 1 MB of raw text) close a row group sooner
            while held >= ROW_GROUP_ROWS or (held and (
                    batch is None or sum(b.nbytes for b in pending) >= ROW_GROUP_BYTES)):
                table = pa.Table.from_batches(pending, schema)
                n = min(held, ROW_GROUP_ROWS)
                writer.write(table.slice(0, n).combine_chunks())
                pending, held = table.slice(n).to_batches(), held - n
    return spill.count


def _release_freed_memory() -> None:
    """Give the pages of freed objects back to the system: glibc keeps them otherwise, and the
    sort that follows would come on top of them (the peak of a run)."""
    gc.collect()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).malloc_trim(0)


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
    return _stage_row(system, case_id, run, "gt_compilation", attempt, kind, status)


def _final_rank(o: dict[str, Any]) -> tuple[bool, int]:
    # A manager review overrides any retry; among equals the latest attempt wins.
    return (o.get("attempt_kind") == "manager_review", o["attempt"])


def _hallucination_rows(o: dict[str, Any], ctx: EvalContext) -> list[dict[str, Any]]:
    """The hallucination rows of an accepted judgment, `is_final` aside."""
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


def write_tables(files: Sequence[SourceFile], ctx: EvalContext, out: Mapping[str, Path],
                 work: Path, parts: Mapping[SourceFile, Path] | None = None,
                 refused: Sequence[dict[str, Any]] = ()) -> Written:
    """Every record of `files` (in the given order; earlier wins) into rows or reject rows,
    written to the tables `out` (name -> path, every name of `JUDGMENT_TABLES`), streamed (see
    the module notes); `work`: an empty folder for the spilled rows. With `parts`
    (`judgment_parts.sync_parts`), a file version is replayed from its part: read and checked
    before, against this same context. `refused`: reject rows found before reading (links that
    lead out of the folder), written first."""
    state = _Ingest(ctx, files, work)
    for row in refused:
        state.problem(row)
    if parts is not None:
        items = read_parts([(sf, parts[sf]) for sf in files])
    else:
        items = (item if isinstance(item, dict) else (item, None)
                 for sf in files for item in _read(sf))
    for item in items:
        if isinstance(item, dict):
            state.problem(item)
        else:
            state.take(*item)
    return state.finish(out, work)


def ingest(files: Sequence[SourceFile], ctx: EvalContext,
           parts: Mapping[SourceFile, Path] | None = None) -> IngestResult:
    """`write_tables` into a temporary folder, read back as rows: for small inputs."""
    with tempfile.TemporaryDirectory(prefix="judgments-") as tmp:
        out = {name: Path(tmp) / f"{name}.parquet" for name in JUDGMENT_TABLES}
        written = write_tables(files, ctx, out, Path(tmp), parts)
        rows = {name: pq.read_table(path).to_pylist() for name, path in out.items()}
    return IngestResult(judgments=rows["rvp_judgments"],
                        hallucinations=rows["rvp_hallucinations"],
                        rejects=rows["rvp_judgment_rejects"],
                        gt_compilations=rows["rvp_gt_compilations"],
                        stages=rows["rvp_stages"], duplicates=written.duplicates)
