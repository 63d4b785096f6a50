"""Judgment files at campaign scale: each file version read and checked once.

A file version of JUDGMENTS_DIR is read (strict JSON, streamed) and each of its records checked
against the context (`judgment_records.judgment_reasons` / `gt_reasons`) once, into a part
(`parts.PartStore`): per record its line, raw text, the value (canonical JSON), its digest, the
reasons it cannot be accepted, and what tells a repeat from a rewrite. `judgments.ingest` then
replays the parts in file order for what depends on more than one record (repeats, conflicts,
the final attempt): no file is parsed or validated again. A part is keyed by the version, a
fingerprint of the context (systems, cases, candidates, evidence ids, GT fingerprints) and
`CHECKS_VERSION`, so new candidates or evidence check every record again.

The parts live under `$BENCHLAKE_HOME/cache/judgment_parts/`, not under `tables/`: no view reads
them (the judgment tables are what `ingest` makes of them), they only save reading and checking
again, so deleting them costs exactly that.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.parts import PartStore, digest
from dagster_project.rynn_vp.ingest import refused_cases
from dagster_project.rynn_vp.judgment_records import (
    CandidateInfo,
    CaseInfo,
    EvalContext,
    SourceFile,
    _read,
    _Record,
    canonical_json,
    gt_reasons,
    judgment_reasons,
)
from dagster_project.tables import connect_raw

# Bump when a rule of judgment_records changes: every part is checked again.
CHECKS_VERSION = "1"
GT_PREFIX = "gt_compilations/"
BATCH_ROWS = 2_000
READ_CHUNK = 2_000  # parts per query of read_parts (what one sorted result holds)

PART_SCHEMA = pa.schema([
    ("line", pa.int64()), ("raw", pa.string()), ("problem", pa.string()),
    ("value", pa.string()), ("sha", pa.string()), ("reasons", pa.list_(pa.string())),
    ("same_as", pa.string()),
])


@dataclass(frozen=True)
class Checked:
    """What the checks said about one record, without the context."""

    sha: str
    reasons: tuple[str, ...]
    same_as: str | None
    value: str  # the record as canonical JSON (what `sha` is the digest of)


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


def check(rec: _Record, ctx: EvalContext, owner_of) -> Checked:
    """The context-dependent checks of one record (as `judgments._Ingest.take` would do them)."""
    obj = rec.obj
    value = canonical_json(obj)
    sha = hashlib.sha256(value.encode()).hexdigest()
    if not isinstance(obj, dict):
        return Checked(sha, (), None, value)
    if rec.source.source_file.startswith(GT_PREFIX):
        return Checked(sha, tuple(gt_reasons(obj, ctx)), value, value)
    same_as = value if "attempt_kind" in obj else canonical_json({"attempt_kind": "initial",
                                                                   **obj})
    return Checked(sha, tuple(judgment_reasons(obj, ctx, owner_of)), same_as, value)


def write_part(sf: SourceFile, ctx: EvalContext, owner_of, store: PartStore, key: str) -> int:
    """Read and check one file version into part `key`; the number of rows."""
    n = 0
    with store.streaming(key, PART_SCHEMA) as out:
        rows: list[dict] = []
        for item in _read(sf):
            if isinstance(item, _Record):
                c = check(item, ctx, owner_of)
                rows.append({"line": item.line, "raw": item.raw, "problem": None,
                             "value": c.value, "sha": c.sha,
                             "reasons": list(c.reasons), "same_as": c.same_as})
            else:
                rows.append({"line": item["line"], "raw": item["raw"],
                             "problem": item["reason"]})
            if len(rows) == BATCH_ROWS:
                out.write(pa.Table.from_pylist(rows, schema=PART_SCHEMA))
                n, rows = n + len(rows), []
        out.write(pa.Table.from_pylist(rows, schema=PART_SCHEMA))
        n += len(rows)
    return n


def _item(sf: SourceFile, row: dict) -> tuple[_Record, Checked] | dict:
    if row["problem"] is not None:
        return {"source_file": sf.source_file, "file_version": sf.version,
                "line": row["line"], "reason": row["problem"], "raw": row["raw"]}
    value = row["value"]
    return (_Record(sf, row["line"], row["raw"] or "", _loads(value)),
            Checked(row["sha"], tuple(row["reasons"]), row["same_as"], value))


_LONG_INTEGER = re.compile(r"[0-9]{19}")


def _loads(value: str) -> Any:
    """A part's canonical JSON read back: by orjson, unless it may hold an integer over 64 bits
    (orjson would make it a float)."""
    return json.loads(value) if _LONG_INTEGER.search(value) else orjson.loads(value)


def read_parts(pairs: Sequence[tuple[SourceFile, Path]]
               ) -> Iterator[tuple[_Record, Checked] | dict]:
    """The records of every (file version, part), in the given order, as `_read` would give
    them, each with its checks (a refused one as its reject row), `BATCH_ROWS` rows in memory
    at a time. Small parts are read up to `READ_CHUNK` at a time by one DuckDB query each:
    thousands of one-record files (a judge harness writing a file per judgment) cost a few
    milliseconds each opened one by one, a fraction of that this way. A part of more than
    `BATCH_ROWS` rows (a large file) is read alone, row group by row group: sorting it in one
    query would hold it whole."""
    con = duckdb.connect(":memory:", config={"python_enable_replacements": False})
    try:
        sizes = dict(con.sql("SELECT file_name, num_rows FROM parquet_file_metadata(?)",
                             params=[[str(p) for _, p in pairs]]).fetchall()) if pairs else {}
        chunk: list[tuple[SourceFile, Path]] = []
        for pair in [*pairs, None]:
            if pair is not None and sizes[str(pair[1])] <= BATCH_ROWS:
                chunk.append(pair)
                if len(chunk) < READ_CHUNK:
                    continue
            yield from _read_chunk(con, chunk)
            chunk = []
            if pair is not None and sizes[str(pair[1])] > BATCH_ROWS:
                for batch in pq.ParquetFile(pair[1]).iter_batches(BATCH_ROWS):
                    for row in batch.to_pylist():
                        yield _item(pair[0], row)
    finally:
        con.close()


def _read_chunk(con: duckdb.DuckDBPyConnection, chunk: Sequence[tuple[SourceFile, Path]]
                ) -> Iterator[tuple[_Record, Checked] | dict]:
    """The rows of small parts `chunk`, in order, by one query."""
    if not chunk:
        return
    order = pa.table({"filename": [str(p) for _, p in chunk], "idx": list(range(len(chunk)))})
    con.register("part_order", order)
    reader = con.sql(
        "SELECT o.idx, p.* EXCLUDE (filename, file_row_number) FROM read_parquet(?, "
        "filename = true, file_row_number = true) AS p JOIN part_order AS o "
        "USING (filename) ORDER BY o.idx, p.file_row_number",
        params=[[str(p) for _, p in chunk]]).to_arrow_reader(BATCH_ROWS)
    for batch in reader:
        for row in batch.to_pylist():
            yield _item(chunk[row["idx"]][0], row)
    con.unregister("part_order")


def sync_parts(store: PartStore, files: Sequence[SourceFile], ctx: EvalContext
               ) -> tuple[dict[SourceFile, Path], list[str]]:
    """The part of every file version (written now if missing), and the keys written now;
    parts no longer wanted (versions gone, context changed) are removed."""
    fingerprint = context_fingerprint(ctx)
    keys = {sf: part_key(store, sf, fingerprint) for sf in files}
    store.keep(keys.values())
    owner: dict[str, str] = {}
    for ev, ids in ctx.evidence_ids.items():
        for eid in ids:
            owner[eid] = ev
    written = []
    for sf, key in keys.items():
        if not store.has(key):
            write_part(sf, ctx, owner.get, store, key)
            written.append(key)
    return {sf: store.path(key) for sf, key in keys.items()}, written


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
