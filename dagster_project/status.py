"""Which run last wrote each table completely, and which runs did not finish.

A materialization can die anywhere (a failed step, Ctrl-C, `kill -9`); the Parquet already written
stays, so the views would serve a partial table with nothing saying so. One small marker per
table, `$BENCHLAKE_HOME/status/<table>/_all.json`, makes that visible:

* `started_run_id`: written by the asset that writes the table when its step starts, before it
  writes anything (`defs/resources.started`), whatever launched the run: CLI, UI, sensor,
  schedule;
* `written_run_id`: written right after its last file was renamed into place.

A table is `complete` when the run that last started it also wrote it, `incomplete` when a later
run started it and did not finish (it failed, was killed, or is still running: the older data,
or none, is what the views serve). The `benchlake_status` view reads the markers;
`benchlake sql` warns when a query reads an incomplete table.

The markers are JSON beside `tables/`, not Parquet in it: they hold run ids and times, and the
tables must stay byte-identical across runs.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dagster_project.filecache import Identity

STATUS_DIR = "status"  # beside tables/, not in it: the tables stay byte-identical across runs
WHOLE_TABLE = "_all"  # the marker's file name


def _marker(home: Path, table: str) -> Path:
    return home / STATUS_DIR / table / f"{WHOLE_TABLE}.json"


def _update(home: Path, table: str, **fields: object) -> None:
    # imported here: `benchlake sql` reads the markers (`incomplete_tables`) and never writes
    # one, and `tables` brings Polars and PyArrow (~0.3 s of every query's start)
    from dagster_project.tables import atomic_write_bytes

    path = _marker(home, table)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {"table_name": table}
    state.update(fields)
    atomic_write_bytes(path, json.dumps(state, sort_keys=True).encode())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def mark_started(home: Path, table: str, run_id: str) -> None:
    """Before run `run_id` writes any file of `table`."""
    _update(home, table, started_run_id=run_id, started_at=_now())


def mark_written(home: Path, table: str, run_id: str, rows: int,
                 parts: dict[str, int] | None = None) -> None:
    """After run `run_id` renamed the last file of `table` into place; `rows` in all (and, for
    a table kept in parts, `parts`: the rows of each, by `part_rows`' key)."""
    _update(home, table, written_run_id=run_id, written_at=_now(), rows=rows,
            **({"part_rows": parts} if parts is not None else {}))


def part_rows(home: Path, table: str) -> dict[str, int]:
    """The rows of each part of `table` when it was last marked written, keyed by the part's
    path under the table's folder and its size: a part is never rewritten under its name
    (which holds the key of what it was built from), so a run counts the new parts' rows only,
    not every footer again. {} if none are known."""
    try:
        return dict(json.loads(_marker(home, table).read_text(encoding="utf-8"))["part_rows"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


# --- what a table was written from: a step whose inputs did not change does nothing -----------
# A step that can say cheaply what it reads (file identities, the versions of the raw tables it
# reads) records it, with what it described, when it writes; a later run that finds the same
# inputs, the table complete and its files as written, describes it again without a read.


def file_identity(path: Path | str) -> list[int] | None:
    """The file cache's identity of `path` (size, mtime, inode), as JSON; None if it is gone."""
    try:
        return list(Identity.of(Path(path).stat()))
    except OSError:
        return None


def remember_inputs(home: Path, table: str, inputs: str, files: list[Path],
                    description: dict[str, object]) -> None:
    """After `mark_written`: `table` (its `files`, under `home`) was written from `inputs` (a
    digest of all it reads) and described by `description` (JSON-able: rows, data version,
    metadata). The files are named relative to the home: a copied home checks its own."""
    _update(home, table, inputs=inputs, description=description,
            files={Path(p).relative_to(home).as_posix(): file_identity(Path(p)) for p in files})


def unchanged(home: Path, table: str, inputs: str) -> dict[str, object] | None:
    """The description `remember_inputs` recorded if `table` was last written completely from
    `inputs` and each of its files is as it was written, else None (the step runs)."""
    try:
        state = json.loads(_marker(home, table).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (state.get("inputs") != inputs or state.get("started_run_id") != state.get("written_run_id")
            or not state.get("files")):
        return None
    for path, identity in state["files"].items():
        if identity is None or file_identity(home / path) != identity:
            return None
    return state.get("description")


_TABLE_IN_VIEW = re.compile(r"/tables/raw/(\w+)[/.]")


def incomplete_tables(con: Any, sql: str) -> dict[str, str]:
    """{table: what is wrong} for the tables `sql` reads (through any views) whose last started
    run did not finish writing them (`benchlake_status`)."""
    try:
        status = dict(con.execute("SELECT table_name, last_started_run_id FROM benchlake_status "
                                  "WHERE status <> 'complete'").fetchall())
    except Exception:  # noqa: BLE001 - no markers yet: nothing to warn about
        return {}
    if not status:
        return {}
    from dagster_project.warehouse.catalog import raw_tables_read

    views = dict(con.execute("SELECT view_name, sql FROM duckdb_views() "
                             "WHERE NOT internal").fetchall())
    built = raw_tables_read()  # what a model built as a table read when it was built
    seen, todo, tables = set(), [sql], set()
    while todo:  # the views the text names, their views, ... and the tables under them
        text = todo.pop()
        tables |= set(_TABLE_IN_VIEW.findall(text))
        for name in set(re.findall(r"\w+", text)) - seen:
            if name in views:
                seen.add(name)
                todo.append(views[name])
            elif name in built:
                seen.add(name)
                tables |= built[name]
    # the catalog itself: a dbt build that did not finish may have replaced some views only
    return {table: (f"run {run} started writing it and did not finish (failed, killed or still "
                    "running): the data served is from an earlier run, if any")
            for table, run in status.items() if table in tables or table == "catalog"}
