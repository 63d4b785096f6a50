"""Judgment records and recorded GT compilations into rows, with nothing lost or silently altered.

Input: the successive versions of the files in `JUDGMENTS_DIR` (`*.json`: one record or an array
of records; `*.jsonl`: one record per non-blank line). Files under `gt_compilations/` hold GT
compilation records, every other file judgment records; both are read and checked as
`judgment_records.py` describes.

Every record ends up in exactly one place: an accepted row, or a reject row that says why and
keeps the raw text. Repeated records are ignored (and listed), and an accepted judgment is never
replaced: a different record with the same system/case/judge run/attempt is refused, because the
judge must send a new attempt instead of rewriting history. The stages each run went through
become rows too. Which attempt of a judge run is final is the staging view's (`is_final` of
`stg_rvp_judgments`: the highest manager review, else the highest attempt), so no row written
depends on a record after it.

Each file version is read, checked and made into rows once, into its part (`judgment_parts`);
a run replays the parts in file order. What depends on the records before is decided one record
at a time on its keys, and the accepted ones' rows are taken from the batch as they are:
only what decides later records stays in memory, a few hundred bytes per record (the digest of
every record read and the place of its first sight, the identity of every accepted record, per
(system, case, judge run) its best attempt so far). The files are cut into segments
(`judgment_replay.Cuts`: about `SEGMENT_FILES` files, at most about `SEGMENT_ROWS`
records, the cuts a function of the names before them), and each table is kept in parts under
`tables/raw/<name>/`, one per segment, named by the segment's number and a digest of every part
name up to its end: a segment whose parts are there is neither replayed nor written again,
given the replay's state at its start (`judgment_replay`). A segment is replayed as soon as its
files are checked, while the next ones are (`judgment_parts.check_parts`). A file added at
the end writes the last segment again; the gt_compilation stage rows of the evaluations that
did not list one (known once every record is read) are one part of `rvp_stages`, rewritten each
run. Memory holds a batch (`BATCH_ROWS` records) and a row group (`ROW_GROUP_ROWS` rows, fewer
if wide). Equal inputs give equal parts, byte for byte.
"""

from __future__ import annotations

import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dagster_project.parts import PartStore, file_rows, read_ahead
from dagster_project.rynn_vp import judgment_replay
from dagster_project.rynn_vp.judgment_parts import (
    BATCH_ROWS,
    GT_COMPILATIONS_SCHEMA,
    GT_PREFIX,
    HALLUCINATIONS_SCHEMA,
    JUDGMENT_REJECTS_SCHEMA,
    JUDGMENTS_SCHEMA,
    ROW_COLUMNS,
    STAGES_SCHEMA,
    CheckedParts,
    gt_stage_row,
    judgment_store,
    sync_parts,
)
from dagster_project.rynn_vp.judgment_records import EvalContext, SourceFile, _reject
from dagster_project.rynn_vp.judgment_replay import REPLAY_VERSION, part_reader, read_parts
from dagster_project.tables import rows_to_table

# The tables `write_tables` fills (raw_<name>), with their schemas
JUDGMENT_TABLES = {
    "rvp_judgments": JUDGMENTS_SCHEMA,
    "rvp_hallucinations": HALLUCINATIONS_SCHEMA, "rvp_judgment_rejects": JUDGMENT_REJECTS_SCHEMA,
    "rvp_gt_compilations": GT_COMPILATIONS_SCHEMA, "rvp_stages": STAGES_SCHEMA,
}
# A written part's row groups: at most this many rows, closed sooner at this many bytes; what
# is held to write one.
ROW_GROUP_ROWS = 16_384
ROW_GROUP_BYTES = 32 * 2**20
GT_STAGES = "gt_compilation_stages"  # the label of `rvp_stages`' part of them (after the rest)
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
    """What `write_tables` wrote: the repeated records it ignored, the segments it wrote (of
    how many), the best attempt of each judge run's evaluation as the replay ranked them (the
    index it held anyway), and the tables' stores."""

    duplicates: int
    segments: tuple[int, int]
    groups: Mapping[tuple[str, str, str], _Group] = field(compare=False, repr=False)
    stores: Mapping[str, PartStore] = field(compare=False, repr=False)

    @property
    def rows(self) -> dict[str, int]:
        """The rows of each table, from every part's footer (the asset counts the new parts'
        only: `resources.describe_written`)."""
        return {name: store.rows() for name, store in self.stores.items()}

    @property
    def finals(self) -> frozenset[tuple[str, str, str, int]]:
        """The final attempts, `(system, case_id, judge_run_id, attempt)`, as the replay
        decided them (`ingest`; the tables leave that to `stg_rvp_judgments`)."""
        return frozenset((*group, g.best[1]) for group, g in self.groups.items())


@dataclass(slots=True)
class _Group:
    """The accepted attempts of one (system, case, judge run), as far as the rest needs."""

    best: tuple[bool, int]  # the final attempt's rank so far: (a manager review, attempt)
    lists_gt_stage: bool  # an attempt listed its gt_compilation stage itself


class _PartWriter:
    """The rows of one table made by one segment, written as they come into a part, in row
    groups of `ROW_GROUP_ROWS` rows (closed sooner at `ROW_GROUP_BYTES`): what is held is
    one row group. A segment is always replayed from its start, so its batches, and so its
    row groups and bytes, are the same in every run."""

    def __init__(self, store: PartStore, key: str, stack: ExitStack) -> None:
        self.schema = store.schema
        self.writer = stack.enter_context(store.streaming(key, self.schema))
        self.dicts: list[dict[str, Any]] = []
        self.pending: list[pa.RecordBatch] = []
        self.held = 0

    def add(self, row: dict[str, Any]) -> None:
        self.dicts.append(row)
        if len(self.dicts) == BATCH_ROWS:
            self._take_dicts()

    def add_table(self, table: pa.Table) -> None:
        self._take_dicts()  # the rows given one by one come first: they were made first
        self._take(table)
        self._write(last=False)

    def close(self) -> None:
        """The last rows out (the part appears when the segment's `ExitStack` closes)."""
        self._take_dicts()
        self._write(last=True)

    def _take_dicts(self) -> None:
        if self.dicts:
            self._take(rows_to_table(self.dicts, self.schema))
            self.dicts = []

    def _take(self, table: pa.Table) -> None:
        if table.num_rows:
            self.pending.extend(table.cast(self.schema).to_batches())
            self.held += table.num_rows

    def _write(self, last: bool) -> None:
        # wide rows (a reject keeps up to 1 MB of raw text) close a row group sooner
        while self.held >= ROW_GROUP_ROWS or (self.held and (
                last or sum(b.nbytes for b in self.pending) >= ROW_GROUP_BYTES)):
            whole = pa.Table.from_batches(self.pending, self.schema)
            n = min(self.held, ROW_GROUP_ROWS)
            self.writer.write(whole.slice(0, n).combine_chunks())
            self.pending, self.held = whole.slice(n).to_batches(), self.held - n


def _rows_of(column: pa.Array) -> pa.Table:
    """The struct rows `column` (one per record) as a table."""
    return pa.Table.from_struct_array(column)


def _list_rows_of(column: pa.Array) -> pa.Table:
    """The struct rows of list `column` (a list per record) as a table, in list order."""
    return pa.Table.from_struct_array(pc.list_flatten(column))


def judgment_table_stores(home: Path) -> dict[str, PartStore]:
    """The part stores of the judgment tables, `tables/raw/<name>/`."""
    return {name: PartStore.of_table(home, name, REPLAY_VERSION, schema)
            for name, schema in JUDGMENT_TABLES.items()}


class _Ingest:
    def __init__(self, files: Sequence[SourceFile]) -> None:
        self.index = {sf: i for i, sf in enumerate(files)}
        self.files = list(files)
        self.out: dict[str, _PartWriter] = {}  # the segment being written, per table
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
            self.groups[group] = _Group(rank, lists_gt)
        else:
            if rank > g.best:  # among equals the first stays (as `max` would keep it)
                g.best = rank
            g.lists_gt_stage |= lists_gt

    def current_gt(self, seq: int, case: str, run: str) -> None:
        self.current_log.append((seq, case, run))
        self.current[case].add(run)

    def where_text(self, where: int) -> str:
        sf = self.files[where >> _LINE_BITS]
        return f"{sf.source_file} v{sf.version} line {where & ((1 << _LINE_BITS) - 1)}"

    def add(self, name: str, row: dict[str, Any]) -> None:
        self.out[name].add(row)

    def problem(self, row: dict[str, Any]) -> None:
        """A reject row of the reader (unreadable record or file)."""
        self.seq += 1
        self.add("rvp_judgment_rejects", row)

    def take(self, batch: pa.RecordBatch, files: Sequence[SourceFile]) -> None:
        """A batch of part rows, in file order (`judgment_replay.read_parts`): what depends on
        the records before is decided here, one record at a time on its keys; the rows of
        the accepted ones are then taken from the batch as they are."""
        n = batch.num_rows
        (idxs, lines, problems, shas, all_reasons, is_object, idents, same_ases,
         lists_gt) = (batch.column(name).to_pylist() for name in (
            "idx", "line", "problem", "sha", "reasons", "is_object", "ident", "same_as",
            "lists_gt"))
        judgment, gt = batch.column("judgment"), batch.column("gt")
        systems, cases, runs, attempts, kinds = (judgment.field(f).to_pylist() for f in (
            "system", "case_id", "judge_run_id", "attempt", "attempt_kind"))
        gt_cases, gt_runs, gt_current = (gt.field(f).to_pylist() for f in (
            "case_id", "judge_run_id", "is_current"))
        # per file of the batch: its index in the replay, and whether it holds GT compilations
        file_no = [self.index[sf] for sf in files]
        gt_file = [sf.source_file.startswith(GT_PREFIX) for sf in files]
        accepted = np.zeros(n, bool)
        seen, known_judgments, starts = self.seen, self.judgments, self.starts
        for i in range(n):
            k = idxs[i]
            sf, no = files[k], file_no[k]
            if no not in starts:
                starts[no] = self.seq
            self.seq += 1
            line = lines[i]
            if problems[i] is not None:
                self.add("rvp_judgment_rejects", _reject(sf, line, problems[i],
                                                         batch.column("raw")[i].as_py()))
                continue
            where = (no << _LINE_BITS) | line
            is_gt = gt_file[k]
            key = bytes.fromhex(shas[i]) + (b"g" if is_gt else b"j")
            first = seen.get(key)
            if first is not None:
                self.duplicate(batch, i, sf, first, "same content")
                continue
            seen[key] = where
            reasons = all_reasons[i]
            if not is_object[i]:
                self.reject(batch, i, sf, reasons)
                continue
            ident = idents[i] and bytes.fromhex(idents[i])
            if is_gt:
                first = self.gts.get(ident) if ident is not None else None
                if first is not None:
                    reasons.append(f"conflicts with {self.where_text(first)}: same case/"
                                   "fingerprint/judge_run, different content")
                if reasons:
                    self.reject(batch, i, sf, reasons)
                    continue
                self.gts[ident] = where
                if gt_current[i]:
                    self.current_gt(self.seq, gt_cases[i], gt_runs[i])
                accepted[i] = True
                continue
            same_as = same_ases[i] and bytes.fromhex(same_ases[i])
            known = known_judgments.get(ident) if ident is not None else None
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
            known_judgments[ident] = (where, same_as)
            accepted[i] = True
            group = (sys.intern(systems[i]), sys.intern(cases[i]), sys.intern(runs[i]))
            # A manager review overrides any retry; among equals the latest attempt wins.
            self.accept(self.seq, group, (kinds[i] == "manager_review", attempts[i]),
                        lists_gt[i])
        if not accepted.any():
            return
        kept = batch.select(list(ROW_COLUMNS)).filter(pa.array(accepted))
        judgments = pc.is_valid(kept.column("judgment"))
        for name, column, rows_of in (
                ("rvp_judgments", "judgment", _rows_of),
                ("rvp_hallucinations", "hallucinations", _list_rows_of),
                ("rvp_stages", "stages", _list_rows_of),
                ("rvp_gt_compilations", "gt", _rows_of)):
            which = judgments if column != "gt" else pc.invert(judgments)
            self.out[name].add_table(rows_of(kept.column(column).filter(which)))

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

    def gt_stage_rows(self) -> pa.Table:
        """The gt_compilation stage of every evaluation and judge run whose attempts did not
        list it, known once every record is read: by (system, case, judge run)."""
        rows = [gt_stage_row(group, self.current.get(group[1], set()))
                for group, g in sorted(self.groups.items()) if not g.lists_gt_stage]
        return rows_to_table(rows, STAGES_SCHEMA)


def write_tables(files: Sequence[SourceFile], ctx: EvalContext,
                 stores: Mapping[str, PartStore], work: Path,
                 parts: Mapping[SourceFile, Path] | None = None,
                 refused: Sequence[dict[str, Any]] = (),
                 checkpoint: Path | None = None) -> Written:
    """Every record of `files` (in the given order; earlier wins) into rows or reject rows,
    written to the tables `stores` (name -> its part store, every name of `JUDGMENT_TABLES`;
    `judgment_table_stores`) a segment at a time (see the module notes). `work`: a folder for
    the parts when `parts` is not given (each file version's, checked against `ctx`:
    `judgment_parts.sync_parts`, or `check_parts` while it checks: a segment is replayed once
    its parts are there). `refused`: reject rows found before reading (links out of the
    folder), the first rows written. `checkpoint`: a folder for the replay's state
    (`judgment_replay`): the segments before the first one missing are then neither replayed
    nor written, and the parts it read are not opened again for their rows."""
    if parts is None:
        parts, _ = sync_parts(judgment_store(work), files, ctx)
    checking = parts if isinstance(parts, CheckedParts) else CheckedParts(dict(parts), [])
    names = [parts[sf].name for sf in files]
    # each part's rows: known to the kept replay, told by its check, or from its footer
    known = judgment_replay.part_rows(checkpoint) if checkpoint else {}
    now = [checking.checked_now(sf) for sf in files]
    rows: list[int | None] = [None if now[i] else known.get(name) for i, name in enumerate(names)]
    unknown = [i for i, n in enumerate(rows) if n is None and not now[i]]
    for i, n in zip(unknown, file_rows([parts[files[i]] for i in unknown]), strict=True):
        rows[i] = n

    cuts = judgment_replay.Cuts(names, refused)
    segs: list[tuple[int, int, str]] = []
    keys: list[dict[str, str]] = []

    def close(seg: tuple[int, int, str]) -> None:
        segs.append(seg)
        keys.append({name: store.key(f"{len(keys):05d}", seg[2])
                     for name, store in stores.items()})

    def tell(i: int) -> None:  # the rows of part i (waiting for its check) into the cuts
        if rows[i] is None:
            rows[i] = checking.rows(files[i])
        if (seg := cuts.add(rows[i])) is not None:
            close(seg)

    # the segments before the first part checked now are cut without waiting: a segment whose
    # parts are there needs no replay, given the replay's state at its end
    while cuts.told < len(names) and not now[cuts.told]:
        tell(cuts.told)
    if not names:  # one segment, of the refused rows only
        close((0, 0, cuts.chain))
    todo = next((n for n, k in enumerate(keys)
                 if not all(stores[name].has(key) for name, key in k.items())), len(segs))
    # where the replay may begin: a segment's start, up to the first one to write (else the
    # open segment's: after the last file when all are told)
    starts = [first for first, _, _ in segs[:todo]] + [segs[todo][0] if todo < len(segs)
                                                        else cuts.first]
    for store in stores.values():
        store.ensure_schema()
    state = _Ingest(files)
    start = judgment_replay.restore(checkpoint, state, names, refused, starts) \
        if checkpoint else 0
    written, n = 0, 0
    with part_reader() as db:
        while True:
            while n == len(segs) and cuts.told < len(names):
                tell(cuts.told)  # the next segment, once its parts are there
            if n == len(segs):
                break
            first, end, _ = segs[n]
            n += 1
            if first < start:
                continue  # its rows are those of the state's files, and are there
            written += 1
            with ExitStack() as stack:
                state.out = {name: _PartWriter(stores[name], keys[n - 1][name], stack)
                             for name in JUDGMENT_TABLES}
                if n == 1:
                    for row in refused:
                        state.problem(row)
                # DuckDB reads and types the next batches while the last one is taken
                for batch, batch_files in read_ahead(read_parts(
                        db, [(sf, parts[sf]) for sf in files[first:end]], rows[first:end])):
                    state.take(batch, batch_files)
                for writer in state.out.values():
                    writer.close()
            state.out = {}
    tail = stores["rvp_stages"].key(GT_STAGES, segs[-1][2])
    for name, store in stores.items():
        store.keep([k[name] for k in keys] + ([tail] if name == "rvp_stages" else []))
    if written and checkpoint is not None:  # else the state is the one saved
        judgment_replay.save(checkpoint, names, refused, state, rows)
    if written or not stores["rvp_stages"].has(tail):
        stores["rvp_stages"].write(tail, state.gt_stage_rows())
    return Written(state.duplicates, (written, len(segs)), state.groups, stores)


_INGEST_ORDER = {
    "rvp_judgments": lambda r: (r["system"], r["case_id"], r["judge_run_id"], r["attempt"]),
    "rvp_hallucinations": lambda r: (r["system"], r["case_id"], r["judge_run_id"], r["attempt"],
                                     r["hallucination_no"]),
    "rvp_judgment_rejects": lambda r: (r["source_file"], r["file_version"] or 0,
                                       r["line"] is not None, r["line"] or 0),
    "rvp_gt_compilations": lambda r: (r["case_id"], r["fingerprint"], r["judge_run_id"]),
    "rvp_stages": lambda r: (r["system"], r["case_id"], r["judge_run_id"], r["stage_no"],
                             r["attempt"] or 0),
}


def ingest(files: Sequence[SourceFile], ctx: EvalContext,
           parts: Mapping[SourceFile, Path] | None = None) -> IngestResult:
    """`write_tables` into a temporary folder, read back as rows sorted by their keys (file
    order among equals), each judgment and hallucination with `is_final` as the replay decided
    it: for small inputs."""
    with tempfile.TemporaryDirectory(prefix="judgments-") as tmp:
        stores = {name: PartStore(Path(tmp) / name, REPLAY_VERSION, schema)
                  for name, schema in JUDGMENT_TABLES.items()}
        written = write_tables(files, ctx, stores, Path(tmp), parts)
        rows = {name: sorted((r for k in store.all_keys() for r in store.load(k).to_pylist()),
                             key=_INGEST_ORDER[name])  # stable: file order among equals
                for name, store in stores.items()}
    for name in ("rvp_judgments", "rvp_hallucinations"):
        for r in rows[name]:
            r["is_final"] = (r["system"], r["case_id"], r["judge_run_id"],
                             r["attempt"]) in written.finals
    return IngestResult(judgments=rows["rvp_judgments"],
                        hallucinations=rows["rvp_hallucinations"],
                        rejects=rows["rvp_judgment_rejects"],
                        gt_compilations=rows["rvp_gt_compilations"],
                        stages=rows["rvp_stages"], duplicates=written.duplicates)
