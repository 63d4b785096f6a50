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
from datetime import UTC, datetime
from pathlib import Path

from dagster_project.tables import atomic_write_bytes

STATUS_DIR = "status"  # beside tables/, not in it: the tables stay byte-identical across runs
WHOLE_TABLE = "_all"  # the marker's file name


def _marker(home: Path, table: str) -> Path:
    return home / STATUS_DIR / table / f"{WHOLE_TABLE}.json"


def _update(home: Path, table: str, **fields: object) -> None:
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


def mark_written(home: Path, table: str, run_id: str, rows: int) -> None:
    """After run `run_id` renamed the last file of `table` into place; `rows` in all."""
    _update(home, table, written_run_id=run_id, written_at=_now(), rows=rows)
