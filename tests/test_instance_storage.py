"""benchlake's event log (`instance_storage.EventLogStorage`): one connection per file, whatever
the number of events, and what it remembers of the schema forgotten by a wipe."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import sqlalchemy as db

from dagster_project.instance_storage import EventLogStorage
from dagster_project.runner import dagster_instance
from tests.conftest import settings_for

EVENTS = 40


def _materialize(instance: dg.DagsterInstance, n: int) -> None:
    for i in range(n):  # tagged: Dagster asks whether the tags table exists for each one
        instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key=f"a{i % 4}", tags={"dagster/data_version": str(i)}))


def test_events_reuse_the_files_connections(tmp_path: Path) -> None:
    instance = dagster_instance(settings_for(tmp_path / "home"))
    assert isinstance(instance.event_log_storage, EventLogStorage)
    _materialize(instance, 2)  # the files and their tables created
    opened: list[object] = []

    def count(dbapi_connection: object, _record: object) -> None:
        opened.append(dbapi_connection)

    db.event.listen(db.engine.Engine, "connect", count)
    try:
        _materialize(instance, EVENTS)
    finally:
        db.event.remove(db.engine.Engine, "connect", count)
    # Dagster's own storage opens a new engine (and connection) per event and per table
    # question; here none is opened again
    assert len(opened) == 0
    for i in range(4):
        latest = instance.get_latest_materialization_event(dg.AssetKey(f"a{i}"))
        assert latest is not None and latest.tags["dagster/data_version"] == str(EVENTS - 4 + i)
    assert instance.event_log_storage.supports_asset_checks

    instance.wipe()  # the tables are created again: what was remembered is asked again
    _materialize(instance, 4)
    assert instance.get_latest_materialization_event(dg.AssetKey("a3")) is not None
    assert instance.event_log_storage.supports_asset_checks


@dg.asset(check_specs=[dg.AssetCheckSpec("positive", asset="numbers"),
                       dg.AssetCheckSpec("small", asset="numbers")])
def numbers() -> dg.MaterializeResult:
    return dg.MaterializeResult(check_results=[
        dg.AssetCheckResult(check_name="positive", passed=True),
        dg.AssetCheckResult(check_name="small", passed=False)])


@dg.asset(deps=[numbers])
def total() -> None:
    return None


def _run(home: Path, batch_size: str, monkeypatch) -> tuple[int, list, list]:
    """(commits, the run's events, its checks' executions) of one materialization."""
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", batch_size)
    instance = dagster_instance(settings_for(home))
    dg.materialize([numbers, total], instance=instance)  # files and tables created
    commits: list[object] = []

    def count(conn: object) -> None:
        commits.append(conn)

    db.event.listen(db.engine.Engine, "commit", count)
    try:
        run_id = dg.materialize([numbers, total], instance=instance).run_id
    finally:
        db.event.remove(db.engine.Engine, "commit", count)
    events = [(e.dagster_event_type, e.dagster_event.asset_key if e.dagster_event else None)
              for e in instance.all_logs(run_id)]
    checks = [(c, instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("numbers"), c), limit=1)[0].status)
        for c in ("positive", "small")]
    return len(commits), events, checks


def test_a_runs_planned_events_are_one_transaction_per_file(tmp_path: Path, monkeypatch) -> None:
    one_by_one = _run(tmp_path / "single", "0", monkeypatch)
    batched = _run(tmp_path / "batched", "10000", monkeypatch)
    # the same events and check executions, in fewer transactions: 2 planned materializations
    # (each written to the run's file and the index) and 2 planned checks (the run's file, the
    # index and the check's execution) were 10 transactions, now one per file
    assert batched[1:] == one_by_one[1:]
    assert [s.value for _, s in batched[2]] == ["SUCCEEDED", "FAILED"]
    assert sum(1 for kind, _ in batched[1] if kind.value.endswith("PLANNED")) == 4
    assert one_by_one[0] - batched[0] == 10 - 2


def test_an_event_log_opens_on_a_new_folder(tmp_path: Path) -> None:
    """Dagster's constructor migrates a new folder's index through the storage's own
    connections: they exist before it runs."""
    storage = EventLogStorage(str(tmp_path / "event_logs"))
    try:
        assert storage.has_table("event_logs")
        assert (tmp_path / "event_logs" / "index.db").is_file()
    finally:
        storage.dispose()
