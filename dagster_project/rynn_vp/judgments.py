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

Each file version is read, checked and made into rows once, into its part (`judgment_parts`);
a run replays the parts. Memory is bounded by a batch, not by the records: the parts are read
`BATCH_ROWS` rows at a time; what depends on the records before is decided one record at a time
on its keys, and the rows of the accepted ones are taken from the batch as they are (columns,
spilled to disk); only what decides later records stays in memory, a few hundred bytes per
record: the digest of every record read and the place of its first sight, the identity of
every accepted record, and per (system, case, judge run) its best attempt so far. `is_final`
and the gt_compilation stage rows are known at the end; DuckDB then sorts the keys of each
spilled table within `SORT_MEMORY` (the rest on disk), fetches its rows in that order a slice at
a time (`SLICE_BYTES`), and it is written row group by row group (`ROW_GROUP_ROWS`,
fewer if wide):
a smaller table has exactly the bytes `tables.write_table` gives it, a larger one the same rows
in more row groups, equal inputs always equal bytes.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dagster_project.rynn_vp import judgment_replay
from dagster_project.rynn_vp.judgment_parts import (
    BATCH_ROWS,
    GT_COMPILATIONS_SCHEMA,
    GT_PREFIX,
    HALLUCINATIONS_SCHEMA,
    JUDGMENT_REJECTS_SCHEMA,
    JUDGMENTS_SCHEMA,
    STAGES_SCHEMA,
    gt_stage_row,
    judgment_store,
    read_parts,
    sync_parts,
)
from dagster_project.rynn_vp.judgment_records import EvalContext, SourceFile, _reject
from dagster_project.tables import rows_to_table, streaming_parquet, write_table

# The tables `write_tables` fills (raw_<name>), with their schemas
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
RELEASE_RECORDS = 50_000  # a smaller index is not worth a collection of the heap (~0.15 s)
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
    written to `path` (rows given one by one: every `BATCH_ROWS`)."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path, self.schema, self.rows, self.count = path, schema, [], 0
        self.tail: Path | None = None  # a second file of rows (`_Ingest.finish`)
        self.writer = pq.ParquetWriter(path, schema, compression="zstd", compression_level=1)

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.count += 1
        if len(self.rows) == BATCH_ROWS:
            self.flush()

    def add_table(self, table: pa.Table) -> None:
        if table.num_rows:
            self.writer.write_table(table.cast(self.schema))
            self.count += table.num_rows

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


def _rows_of(column: pa.Array, seqs: pa.Array) -> pa.Table:
    """The struct rows `column` (one per record) as a table, with `_seq` = `seqs`, `_k` = 0."""
    table = pa.Table.from_struct_array(column)
    return table.append_column("_seq", seqs).append_column(
        "_k", pa.array(np.zeros(len(seqs), np.int64)))


def _list_rows_of(column: pa.Array, seqs: pa.Array) -> pa.Table:
    """The struct rows of list `column` (a list per record) as a table: `_seq` that of the
    record, `_k` the row's place in its list."""
    table = pa.Table.from_struct_array(pc.list_flatten(column))
    parents = pc.list_parent_indices(column).to_numpy()
    offsets = column.offsets.to_numpy()
    k = np.arange(len(parents), dtype=np.int64) - (offsets[parents] - offsets[0])
    return table.append_column("_seq", pc.take(seqs, pa.array(parents))).append_column(
        "_k", pa.array(k))


class _Ingest:
    def __init__(self, files: Sequence[SourceFile], work: Path) -> None:
        self.index = {sf: i for i, sf in enumerate(files)}
        self.files = list(files)
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
        # ... and where each came from, so that `judgment_replay` can roll it back to a file:
        self.starts: dict[int, int] = {}  # file index -> `seq` before its first record
        self.log: list[tuple] = []  # accepted judgments: (seq, group, rank, lists_gt)
        self.current_log: list[tuple[int, str, str]] = []  # (seq, case, run) of current GTs
        self.dup_seqs: list[int] = []

    def accept(self, seq: int, group: tuple[str, str, str], rank: tuple[bool, int],
               lists_gt: bool) -> None:
        """An accepted judgment into the state of its group."""
        self.log.append((seq, group, rank, lists_gt))
        g = self.groups.get(group)
        if g is None:
            self.groups[group] = _Group(rank, seq, lists_gt)
        else:
            if rank > g.best:  # among equals the first stays (as `max` would keep it)
                g.best, g.best_seq = rank, seq
            g.lists_gt_stage |= lists_gt

    def current_gt(self, seq: int, case: str, run: str) -> None:
        self.current_log.append((seq, case, run))
        self.current[case].add(run)

    def where_text(self, where: int) -> str:
        sf = self.files[where >> _LINE_BITS]
        return f"{sf.source_file} v{sf.version} line {where & ((1 << _LINE_BITS) - 1)}"

    def add(self, name: str, row: dict[str, Any], k: int = 0) -> None:
        self.spills[name].add({**row, "_seq": self.seq, "_k": k})

    def problem(self, row: dict[str, Any]) -> None:
        """A reject row of the reader (unreadable record or file)."""
        self.seq += 1
        self.add("rvp_judgment_rejects", row)

    def take(self, batch: pa.RecordBatch, files: Sequence[SourceFile]) -> None:
        """A batch of part rows, in file order (`judgment_parts.read_parts`): what depends on
        the records before is decided here, one record at a time on its keys; the rows of
        the accepted ones are then taken from the batch as they are."""
        n = batch.num_rows
        cols = {name: batch.column(name).to_pylist() for name in (
            "idx", "line", "problem", "sha", "reasons", "is_object", "ident", "same_as",
            "lists_gt")}
        judgment, gt = batch.column("judgment"), batch.column("gt")
        keys = {f: judgment.field(f).to_pylist()
                for f in ("system", "case_id", "judge_run_id", "attempt", "attempt_kind")}
        gt_keys = {f: gt.field(f).to_pylist() for f in ("case_id", "judge_run_id", "is_current")}
        accepted = np.zeros(n, bool)
        seqs = np.zeros(n, np.int64)
        for i in range(n):
            sf = files[cols["idx"][i]]
            self.starts.setdefault(self.index[sf], self.seq)
            self.seq += 1
            seqs[i] = self.seq
            line = cols["line"][i]
            if cols["problem"][i] is not None:
                self.add("rvp_judgment_rejects", _reject(sf, line, cols["problem"][i],
                                                         batch.column("raw")[i].as_py()))
                continue
            where = (self.index[sf] << _LINE_BITS) | line
            is_gt = sf.source_file.startswith(GT_PREFIX)
            key = bytes.fromhex(cols["sha"][i]) + (b"g" if is_gt else b"j")
            first = self.seen.get(key)
            if first is not None:
                self.duplicate(batch, i, sf, first, "same content")
                continue
            self.seen[key] = where
            reasons = cols["reasons"][i]
            if not cols["is_object"][i]:
                self.reject(batch, i, sf, reasons)
                continue
            ident = cols["ident"][i] and bytes.fromhex(cols["ident"][i])
            if is_gt:
                first = self.gts.get(ident) if ident is not None else None
                if first is not None:
                    reasons.append(f"conflicts with {self.where_text(first)}: same case/"
                                   "fingerprint/judge_run, different content")
                if reasons:
                    self.reject(batch, i, sf, reasons)
                    continue
                self.gts[ident] = where
                if gt_keys["is_current"][i]:
                    self.current_gt(self.seq, gt_keys["case_id"][i], gt_keys["judge_run_id"][i])
                accepted[i] = True
                continue
            same_as = cols["same_as"][i] and bytes.fromhex(cols["same_as"][i])
            known = self.judgments.get(ident) if ident is not None else None
            if known is not None:
                if not reasons and known[1] == same_as:
                    self.duplicate(batch, i, sf, known[0],
                                   "same content once defaults are applied")
                    continue
                reasons.append(f"conflicts with {self.where_text(known[0])}: same system/"
                               "case/judge_run/attempt, different content (send a new "
                               "attempt instead)")
            if reasons:
                self.reject(batch, i, sf, reasons)
                continue
            self.judgments[ident] = (where, same_as)
            accepted[i] = True
            group = tuple(sys.intern(keys[k][i]) for k in ("system", "case_id", "judge_run_id"))
            # A manager review overrides any retry; among equals the latest attempt wins.
            rank = (keys["attempt_kind"][i] == "manager_review", keys["attempt"][i])
            self.accept(self.seq, group, rank, cols["lists_gt"][i])
        if not accepted.any():
            return
        mask, seq = pa.array(accepted), pa.array(seqs)
        kept = batch.filter(mask)
        kept_seq = seq.filter(mask)
        judgments = pc.is_valid(kept.column("judgment"))
        for name, column, rows_of in (
                ("rvp_judgments", "judgment", _rows_of),
                ("rvp_hallucinations", "hallucinations", _list_rows_of),
                ("rvp_stages", "stages", _list_rows_of),
                ("rvp_gt_compilations", "gt", _rows_of)):
            which = judgments if column != "gt" else pc.invert(judgments)
            self.spills[name].add_table(rows_of(kept.column(column).filter(which),
                                                kept_seq.filter(which)))

    def reject(self, batch: pa.RecordBatch, i: int, sf: SourceFile,
               reasons: Sequence[str]) -> None:
        unique = list(dict.fromkeys(reasons))  # the same sentence twice helps no one
        self.add("rvp_judgment_rejects", _reject(sf, batch.column("line")[i].as_py(),
                                                 "; ".join(unique),
                                                 batch.column("raw")[i].as_py()))

    def duplicate(self, batch: pa.RecordBatch, i: int, sf: SourceFile, first: int,
                  how: str) -> None:
        self.duplicates += 1
        self.dup_seqs.append(self.seq)
        self.reject(batch, i, sf, [f"duplicate of {self.where_text(first)} ({how}): ignored"])

    # --- rows ------------------------------------------------------------------------------

    def finish(self, out: Mapping[str, Path], work: Path,
               save: Callable[[_Ingest], None] | None = None) -> Written:
        """The rows known only once every record is read, then every table sorted into `out`
        (`save`: given the state after the last record, the spills closed)."""
        for spill in self.spills.values():
            spill.close()
        if save is not None:
            save(self)
        self.seq = _AFTER_ALL
        # the gt_compilation stage rows: a spill of their own, after the replay's
        tail = _Spill(work / "rvp_stages.tail.spill.parquet", _spill_schema("rvp_stages"))
        self.spills["rvp_stages"].tail = tail.path
        for group, g in self.groups.items():
            if not g.lists_gt_stage:
                tail.add({**gt_stage_row(group, self.current.get(group[1], set())),
                          "_seq": self.seq, "_k": 0})
        tail.close()
        self.spills["rvp_stages"].count += tail.count
        finals = pa.table({"seq": sorted(g.best_seq for g in self.groups.values())},
                          schema=pa.schema([("seq", pa.int64())]))
        held = len(self.seen)
        self.groups.clear()
        self.seen.clear()
        self.judgments.clear()
        self.gts.clear()
        self.log.clear()
        if held >= RELEASE_RECORDS:
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
    spilled = "read_parquet(?, filename = true, file_row_number = true) AS s"
    files = [str(p) for p in (spill.path, spill.tail) if p is not None]
    # a table keeps the order it is filled in: row `rowid` of `positions` is the rowid-th
    con.execute(f"CREATE OR REPLACE TEMP TABLE positions AS SELECT s.filename AS f, "
                f"s.file_row_number AS r FROM {spilled} ORDER BY {order_by}", [files])
    metas = [pq.ParquetFile(p).metadata for p in files]
    row_bytes = sum(m.row_group(i).total_byte_size for m in metas for i in range(m.num_row_groups))
    row_bytes = max(1, row_bytes // spill.count)
    step = max(1, SLICE_BYTES // (row_bytes * BATCH_ROWS)) * BATCH_ROWS
    readers = (con.sql(f"SELECT {columns} FROM {spilled} JOIN (SELECT rowid AS pos, f, r FROM "
                       "positions WHERE rowid >= ? AND rowid < ?) AS p ON s.filename = p.f AND "
                       "s.file_row_number = p.r ORDER BY p.pos",
                       params=[files, lo, lo + step]).to_arrow_reader(BATCH_ROWS)
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


def write_tables(files: Sequence[SourceFile], ctx: EvalContext, out: Mapping[str, Path],
                 work: Path, parts: Mapping[SourceFile, Path] | None = None,
                 refused: Sequence[dict[str, Any]] = (),
                 checkpoint: Path | None = None) -> Written:
    """Every record of `files` (in the given order; earlier wins) into rows or reject rows,
    written to the tables `out` (name -> path, every name of `JUDGMENT_TABLES`), streamed (see
    the module notes); `work`: an empty folder for the spilled rows. `parts`: the part of
    every file version (`judgment_parts.sync_parts`, checked against this same context); without
    them, each file is read and checked into a part in `work` first. `refused`: reject rows
    found before reading (links that lead out of the folder), written first. `checkpoint`: a
    folder for the replay's state (`judgment_replay`): the files the last run replayed in the
    same order (and parts) are not replayed again, only those from the first that differs."""
    if parts is None:
        parts, _ = sync_parts(judgment_store(work), files, ctx)
    state = _Ingest(files, work)
    names = [parts[sf].name for sf in files]
    start = judgment_replay.restore(checkpoint, state, names, refused) if checkpoint else 0
    if not start:
        for row in refused:
            state.problem(row)
    for batch, batch_files in read_parts([(sf, parts[sf]) for sf in files[start:]]):
        state.take(batch, batch_files)
    save = None if checkpoint is None else partial(judgment_replay.save, checkpoint, names,
                                                   refused)
    return state.finish(out, work, save)


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
