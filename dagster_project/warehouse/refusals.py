"""What the warehouse refused, in a few lines: every `*_rejects` view (one per stage family:
`rvp_rejects`, `rvp_judgment_rejects`, `vv_rejects`, `vv_response_rejects`) with its row count,
the files it names and its first reasons. `benchlake materialize` prints it at the end of every run
that left anything refused, so a run that accepted 5 of 15 cases never looks like a clean one.

A view's refusals are counted once per `fingerprints.inputs` fingerprint (its definition and the raw
tables it reads) and kept in the workspace's outcomes: a run that changed nothing they read
counts nothing again. `vv_response_rejects` reads the few rows kept of what is refused
(`raw_vv_unknown_uids`, `raw_vv_later_records`), not the campaign's responses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from dagster_project.warehouse import catalog
from dagster_project.warehouse.catalog import connect, marts, view_names
from dagster_project.warehouse.fingerprints import inputs

FIRST_REASONS = 3
REASON_CHARS = 160


@dataclass(frozen=True)
class Refusals:
    view: str
    rows: int
    files: int
    first: tuple[str, ...]  # "<file>: <reason>", in file order


def refusals(home: Path | str) -> list[Refusals]:
    """The refusals of every rejects view of `home`'s catalog that holds any row."""
    home = Path(home)
    con = connect(home)  # raises, naming the file, when there is no catalog
    try:
        users = set(marts())  # not the staging layer under them
        views = [v for v in view_names(con) if v.endswith("_rejects") and v in users]
        fingerprints = inputs(home)
        uids = catalog.unique_ids()
        with catalog.workspace(home) as ws:
            known, counted = ws.outcomes(), {}
            found = []
            for view in views:
                fingerprint = fingerprints.get(uids.get(view, ""))
                entry = known.get(_KEY + view, {})
                if fingerprint and entry.get("inputs") == fingerprint:
                    rows, files, first = entry["rows"], entry["files"], entry["first"]
                else:
                    rows, files, first = _count(con, view)
                    if fingerprint:
                        counted[_KEY + view] = {"inputs": fingerprint, "rows": rows,
                                                "files": files, "first": first}
                if rows:
                    found.append(Refusals(view, rows, files, tuple(first)))
            if counted:
                ws.record_outcomes(counted)
        return found
    finally:
        con.close()


_KEY = "refusals:"  # the outcomes key of a view's counts


def _count(con: duckdb.DuckDBPyConnection, view: str) -> tuple[int, int, list[str]]:
    """(rows, files, the first reasons) refused by `view`."""
    columns = {c for (c,) in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ?",
        [view]).fetchall()}
    # vv_rejects also notes what it tolerated (action 'noted'): not a refusal.
    where = "WHERE action IS DISTINCT FROM 'noted'" if "action" in columns else ""
    rows, files = con.execute(
        f"SELECT count(*), count(DISTINCT source_file) FROM {view} {where}").fetchone()
    first = con.execute(
        f"SELECT source_file, reason FROM {view} {where} ORDER BY source_file, reason "
        f"LIMIT {FIRST_REASONS}").fetchall() if rows else []
    return rows, files, [f"{_short(f)}: {_short(r, REASON_CHARS)}" for f, r in first]


def summary(found: list[Refusals]) -> list[str]:
    """The lines `benchlake materialize` ends with when anything was refused."""
    if not found:
        return []
    lines = ["refused (the rest was accepted; every row, its file and reason: "
             "benchlake sql \"SELECT * FROM <view>\"):"]
    for r in found:
        lines.append(f"  {r.view}: {r.rows} row(s) from {r.files} file(s)")
        lines += [f"    {first}" for first in r.first]
        if r.rows > len(r.first):
            lines.append(f"    … and {r.rows - len(r.first)} more")
    return lines


def _short(text: str | None, limit: int = 100) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
