"""Which run last wrote each table (and partition) completely, and which runs did not finish.

A materialization can die anywhere (a failed step, Ctrl-C, `kill -9`); the Parquet already written
stays, so the views would serve a partial table with nothing saying so. Two small markers per
(table, partition) under `$BENCHLAKE_HOME/status/<table>/<partition>.json` make that visible:

* `started_run_id`: written by `benchlake materialize` before a run starts, for every table and
  partition the run is about to write;
* `written_run_id`: written right after the table (or partition) file was renamed into place.

A partition is `complete` when the last run that started it also wrote it, `incomplete` when a
later run started and did not write it (it failed, was killed, or is still running: the older
data, or none, is what the views serve). Runs launched from the UI only write the second marker,
so their partitions show as complete once written; a write always supersedes an earlier start.
The `benchlake_status` view reads the markers; `benchlake sql` warns when a query reads an
incomplete table.

The markers are JSON beside `tables/`, not Parquet in it: they hold run ids and times, and the
tables must stay byte-identical across runs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from dagster_project.tables import atomic_write_bytes

STATUS_DIR = "status"  # beside tables/, not in it: the tables stay byte-identical across runs
WHOLE_TABLE = "_all"  # the partition name of an unpartitioned table


def _marker(home: Path, table: str, partition: str | None) -> Path:
    name = (partition or WHOLE_TABLE).replace("/", "%2F")
    return home / STATUS_DIR / table / f"{name}.json"


def _update(home: Path, table: str, partition: str | None, **fields: object) -> None:
    path = _marker(home, table, partition)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {"table_name": table, "partition": partition}
    state.update(fields)
    atomic_write_bytes(path, json.dumps(state, sort_keys=True).encode())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def mark_started(home: Path, table: str, partitions: list[str | None],
                 run_id: str) -> None:
    """Before run `run_id` writes `table` (each of `partitions`; [None] if unpartitioned)."""
    for partition in partitions:
        _update(home, table, partition, started_run_id=run_id, started_at=_now())


def mark_written(home: Path, table: str, partition: str | None, run_id: str,
                 rows: int) -> None:
    """After run `run_id` renamed `table` (its `partition`) into place with `rows` rows."""
    # The data on disk is now this run's, whole: whatever run announced itself before is
    # superseded (a run the runner did not announce, from the UI, starts what it writes).
    now = _now()
    _update(home, table, partition, written_run_id=run_id, written_at=now, rows=rows,
            started_run_id=run_id, started_at=now)
