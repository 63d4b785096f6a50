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
