"""The replay of the judgment parts, kept from one run to the next: one more file is the only
one replayed.

`judgments.write_tables` replays the parts in file order; earlier wins, so what the records of the
first k files decide does not depend on the files after them, and neither do the rows they make:
the tables are written a segment of files at a time (`Cuts`: cut as the rows of each part are told,
so a segment is replayed as soon as its files are checked), each segment's rows into a part of its
own, its parts read by `read_parts`. After a replay its state is saved here (`save`): the digests
and identities seen, with where each was first seen, the accepted judgments and current GT
compilations in the order they came, and the `seq` each file started at. The next run (`restore`)
takes the files the two orders share from the start (the same parts: same file version, context and
checks), rolls the state back to the start of a segment no later than the first file that differs
(every entry made later is dropped, the groups are rebuilt from the accepted judgments before it),
and replays only from there: a file added at the end replays the last segment (the new file and the
few before it in that segment), a file inserted earlier the segments from there on, a changed first
file everything (the full replay). The result is the same rows in the same parts, so the same bytes
(tests/rynn_vp/test_judgment_replay). What is read whole is this small index (an entry per record,
no rows).

Deleting the folder costs one full replay. No Dagster import.
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from dagster_project.parts import digest, file_rows
from dagster_project.rynn_vp.judgment_parts import BATCH_ROWS, PART_SCHEMA, ROW_COLUMNS
from dagster_project.rynn_vp.judgment_records import SourceFile

# Bump when the replay's decisions or its state change: the next run replays everything.
REPLAY_VERSION = "2"
STATE = "state.pickle"
ROWS = "rows.pickle"  # the rows of each part of the last replay, by name (`part_rows`)
_LINE_BITS = 32  # as `judgments._LINE_BITS`: a place is (file index << 32) | line
# A segment of files ends once it holds this many records (a file of as many is a segment of
# its own, so one more such file replays itself alone), or after a file whose name's digest is
# 0 modulo `SEGMENT_FILES` (a harness writing a file per judgment: ~64 files a segment).
SEGMENT_ROWS = 8_192
SEGMENT_FILES = 64
READ_CHUNK = 2_000  # parts per query of read_parts (what one sorted result holds)


class Cuts:
    """The file versions (their parts `names`) cut into segments as the rows of each part are
    told, in order (`add`): a segment ends after a file that brings its records to
    `SEGMENT_ROWS`, or after a file whose part name's digest is 0 modulo `SEGMENT_FILES`, so
    the cuts depend on the names before them only (a file added at the end joins the last
    segment, or starts one). A segment is `(first, end, digest)`; `digest` covers the refused
    rows and every part name up to the segment's end: what its rows depend on."""

    def __init__(self, names: Sequence[str], refused: Sequence[dict[str, Any]]) -> None:
        self.names = names
        self.chain = digest(REPLAY_VERSION, list(refused))
        self.first = self.told = self.held = 0  # the open segment's start, files told, rows

    def add(self, rows: int) -> tuple[int, int, str] | None:
        """The rows of the next part; the segment it ends, if it ends one."""
        name = self.names[self.told]
        self.told += 1
        self.chain, self.held = digest(self.chain, name), self.held + rows
        if self.held >= SEGMENT_ROWS or int(digest(name)[:8], 16) % SEGMENT_FILES == 0 \
                or self.told == len(self.names):
            segment, self.first, self.held = (self.first, self.told, self.chain), self.told, 0
            return segment
        return None


def save(folder: Path, names: Sequence[str], refused: Sequence[dict[str, Any]],
         state: Any, rows: Sequence[int]) -> None:
    """Keep the state of a finished replay of the parts `names` (in order, with their `rows`)
    in `folder` (replaced atomically)."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bounds = [state.seq] * (len(names) + 1)  # `seq` before file i (after the last: the end)
    for i in range(len(names) - 1, -1, -1):
        bounds[i] = state.starts.get(i, bounds[i + 1])
    saved = {"version": REPLAY_VERSION, "names": list(names), "refused": digest(list(refused)),
             "bounds": bounds, "seen": state.seen, "judgments": state.judgments,
             "gts": state.gts, "log": state.log, "current_log": state.current_log,
             "dup_seqs": state.dup_seqs}
    with open(tmp / STATE, "wb") as fh:
        pickle.dump(saved, fh, protocol=pickle.HIGHEST_PROTOCOL)
    with open(tmp / ROWS, "wb") as fh:
        pickle.dump({"version": REPLAY_VERSION, "rows": dict(zip(names, rows, strict=True))}, fh,
                    protocol=pickle.HIGHEST_PROTOCOL)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def part_rows(folder: Path) -> dict[str, int]:
    """The rows of each part the replay kept in `folder` read (a part's name is a digest of
    what it holds), so that the next run opens the footers of new parts only: {} if none."""
    try:
        with open(folder / ROWS, "rb") as fh:
            saved = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError):
        return {}
    return saved["rows"] if saved.get("version") == REPLAY_VERSION else {}


def restore(folder: Path, state: Any, names: Sequence[str], refused: Sequence[dict[str, Any]],
            starts: Sequence[int]) -> int:
    """Roll the saved state of `folder` into the fresh `state` of a replay of the parts `names`,
    back to the latest of `starts` (ascending file indexes where a replay may begin: the
    segments' starts, up to the first one to write again) that the saved files cover: that
    file index (the files before it need no replay), 0 if none."""
    try:
        with open(folder / STATE, "rb") as fh:
            saved = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError):
        return 0
    if saved.get("version") != REPLAY_VERSION or saved["refused"] != digest(list(refused)):
        return 0
    old, k = saved["names"], 0
    while k < min(len(old), len(names)) and old[k] == names[k]:
        k += 1
    k = max((s for s in starts if s <= k), default=0)
    if k == 0:
        return 0
    bound, where = saved["bounds"][k], k << _LINE_BITS
    state.seen = {key: w for key, w in saved["seen"].items() if w < where}
    state.judgments = {key: v for key, v in saved["judgments"].items() if v[0] < where}
    state.gts = {key: w for key, w in saved["gts"].items() if w < where}
    state.starts = {i: s for i, s in enumerate(saved["bounds"][:k])}
    state.dup_seqs = [s for s in saved["dup_seqs"] if s <= bound]
    state.duplicates = len(state.dup_seqs)
    for entry in saved["log"]:
        if entry[0] <= bound:
            state.accept(*entry)
    for seq, case, run in saved["current_log"]:
        if seq <= bound:
            state.current_gt(seq, case, run)
    state.seq = bound
    return k


# ... as `read_parts` gives it: `idx` (see there), the rows typed
READ_SCHEMA = pa.schema([("idx", pa.int64()), *(
    pa.field(f.name, ROW_COLUMNS.get(f.name, f.type)) for f in PART_SCHEMA)])


def _structure(t: pa.DataType) -> Any:
    """DuckDB's `from_json` structure of Arrow type `t`."""
    if pa.types.is_struct(t):
        return {f.name: _structure(f.type) for f in t}
    if pa.types.is_list(t):
        return [_structure(t.value_type)]
    return {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
            pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}[t]


READ_SELECT = ", ".join(
    f"from_json(p.{f.name}, '{orjson.dumps(_structure(ROW_COLUMNS[f.name])).decode()}') "
    f"AS {f.name}" if f.name in ROW_COLUMNS else f"p.{f.name}" for f in PART_SCHEMA)


def part_reader() -> duckdb.DuckDBPyConnection:
    """The DuckDB database `read_parts` reads in, a cursor per call: one for a whole replay.
    A new database costs ~25 ms before its first part is read (its JSON functions set up
    again), and a replay of 60,000 records reads its segments in ~30 calls: a database per
    call doubled the reading (2.1 s, not 1.25 s)."""
    # one thread: a large part streams in file order, a row group at a time
    return duckdb.connect(":memory:", config={"python_enable_replacements": False,
                                              "preserve_insertion_order": True, "threads": 1})


def read_parts(db: duckdb.DuckDBPyConnection, pairs: Sequence[tuple[SourceFile, Path]],
               rows: Sequence[int] | None = None
               ) -> Iterator[tuple[pa.RecordBatch, list[SourceFile]]]:
    """The rows of every (file version, part), in the given order, `BATCH_ROWS` at a time
    (`READ_SCHEMA`: each batch with its column `idx`, the position of each row's file version
    in the list given with it). Small parts are read up to `READ_CHUNK` at a time by one DuckDB
    query each: thousands of one-record files (a judge harness writing a file per judgment)
    cost a few milliseconds each opened one by one, a fraction of that this way. A part of more
    than `BATCH_ROWS` rows (a large file) is read alone, streamed in file order: sorting it in
    one query would hold it whole. `rows`: the rows of each part, when known (`parts.file_rows`).
    `db`: `part_reader()`'s database."""
    con = db.cursor()
    try:
        sizes = dict(zip((str(p) for _, p in pairs), file_rows([p for _, p in pairs])
                         if rows is None else rows, strict=True))
        chunk: list[tuple[SourceFile, Path]] = []
        for pair in [*pairs, None]:
            if pair is not None and sizes[str(pair[1])] <= BATCH_ROWS:
                chunk.append(pair)
                if len(chunk) < READ_CHUNK:
                    continue
            yield from _read_chunk(con, chunk)
            chunk = []
            if pair is not None and sizes[str(pair[1])] > BATCH_ROWS:
                reader = con.sql(f"SELECT 0 AS idx, {READ_SELECT} FROM read_parquet(?) AS p",
                                 params=[str(pair[1])]).to_arrow_reader(BATCH_ROWS)
                for batch in reader:
                    yield batch.cast(READ_SCHEMA), [pair[0]]
    finally:
        con.close()


def _read_chunk(con: duckdb.DuckDBPyConnection, chunk: Sequence[tuple[SourceFile, Path]]
                ) -> Iterator[tuple[pa.RecordBatch, list[SourceFile]]]:
    """The rows of small parts `chunk`, in order, by one query."""
    if not chunk:
        return
    order = pa.table({"filename": [str(p) for _, p in chunk], "idx": list(range(len(chunk)))})
    con.register("part_order", order)
    reader = con.sql(
        f"SELECT o.idx, {READ_SELECT} FROM read_parquet(?, filename = true, file_row_number = true)"
        " AS p JOIN part_order AS o USING (filename) ORDER BY o.idx, p.file_row_number",
        params=[[str(p) for _, p in chunk]]).to_arrow_reader(BATCH_ROWS)
    files = [sf for sf, _ in chunk]
    for batch in reader:
        yield batch.cast(READ_SCHEMA), files
    con.unregister("part_order")
