"""Dagster's SQLite storage (run history, event logs, schedules under `$DAGSTER_HOME`, the same
files), with an event log that costs less per event: what `benchlake materialize` pays for every
materialization, check and step of a run, even when nothing changed.

Dagster's own SQLite event log opens a new engine and connection for every write (an event is
written to its run's file and, for asset and check events, to the index file too: several
connections each) and commits with a sync to disk; closing the last connection to a WAL file
syncs again; it asks whether a table exists, with a new engine, for every tagged asset event
and check event. A run of 76 assets and 229 checks wrote 982 events in 15 s that way. Here each
file keeps one connection per process (the few most recently used files; the others are
closed), remembers the tables and columns it found, and commits in WAL mode with
`synchronous=NORMAL`: durable at each checkpoint, and a crash of the machine (not of the
process) can lose the last events, which is the bookkeeping of a run, never the tables. Other
processes (the UI, the daemon, a sensor's run) share the files as before: SQLite's WAL lets
readers and one writer at a time through, with the busy timeout. The events Dagster writes as a
batch (a new run's planned materializations and checks, ~1 ms each one by one) go in one
transaction per file.

`runner.dagster_instance` names this class in the `dagster.yaml` it writes.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import sqlalchemy as db
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory
from dagster._serdes import ConfigurableClassData

OPEN_FILES = 4  # the run being written and the index, with room for a reader of others
# Dagster stores a new run's planned events (one per asset and check of the run) as batches of
# this many when `DAGSTER_EVENT_BATCH_SIZE` says so (`runner.dagster_instance` sets it): one
# batch for any run benchlake makes.
BATCH_SIZE = 10_000


class EventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` keeping one connection per file open (see the module notes)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        # before Dagster's constructor, which may write (a new folder's index is migrated)
        self._engines: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._tables: set[str] = set()
        self._columns: set[str] = set()
        self._batch: Any = None
        super().__init__(base_dir, inst_data)

    def has_table(self, table_name: str) -> bool:
        # Dagster asks for every asset and check event (the tag and check tables), each time
        # with a new engine and connection: once a table exists it stays (a wipe creates it
        # again, and forgets)
        if table_name not in self._tables and super().has_table(table_name):
            self._tables.add(table_name)
        return table_name in self._tables

    def _has_asset_key_col_on_connection(self, conn: Any, column_name: str) -> bool:
        # asked with a reflection of the table for every materialization; a migration adds
        # columns, never drops them
        if column_name not in self._columns and super()._has_asset_key_col_on_connection(
                conn, column_name):
            self._columns.add(column_name)
        return column_name in self._columns

    def _engine(self, shard: str) -> Any:
        key = (shard, os.getpid())  # a forked child opens its own
        engine = self._engines.get(key)
        if engine is None:
            engine = db.create_engine(
                self.conn_string_for_shard(shard), poolclass=db.pool.StaticPool,
                connect_args={"timeout": 30, "check_same_thread": False})
            db.event.listen(engine, "connect", _pragmas)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            self._engines[key] = engine
            while len(self._engines) > OPEN_FILES:
                self._engines.popitem(last=False)[1].dispose()
        self._engines.move_to_end(key)
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Any]:
        batch = self._batch
        if batch is not None and batch.thread == threading.get_ident():
            yield batch.connection(shard)  # inside `store_event_batch`: its lock, its transaction
            return
        # one user of a file's connection at a time: Dagster's lock, held as Dagster holds it
        with self._db_lock, self._engine(shard).connect() as conn, conn.begin():
            yield conn

    def store_event_batch(self, events: Sequence[Any]) -> None:
        """Every event as `store_event` stores it, in one transaction per file (Dagster's base
        class stores them one by one). Dagster batches a new run's planned materializations and
        checks (`BATCH_SIZE`): ~0.5 ms less per event. If one fails, none is kept, and Dagster
        stores them one by one again."""
        with self._db_lock, ExitStack() as stack:
            self._batch = _Batch(self, stack)
            try:
                for event in events:
                    self.store_event(event)
            finally:
                self._batch = None

    def _close_all(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self._close_all()  # before the files are deleted
        self._tables.clear()
        self._columns.clear()
        super().wipe()

    def delete_events(self, run_id: str) -> None:
        self._close_all()
        super().delete_events(run_id)

    def dispose(self) -> None:
        self._close_all()
        super().dispose()


class _Batch:
    """The one connection and transaction per file of a `store_event_batch`, opened when first
    used and committed (or rolled back) when the batch's `stack` closes."""

    def __init__(self, storage: EventLogStorage, stack: ExitStack) -> None:
        self.thread = threading.get_ident()
        self.storage, self.stack = storage, stack
        self.open: dict[str, Any] = {}

    def connection(self, shard: str) -> Any:
        if shard not in self.open:
            conn = self.stack.enter_context(self.storage._engine(shard).connect())
            self.stack.enter_context(conn.begin())
            self.open[shard] = conn
        return self.open[shard]


def _pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class Storage(DagsterSqliteStorage):
    """`DagsterSqliteStorage` (same folders under `base_dir`) with `EventLogStorage`."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(base_dir, inst_data)
        self._event_log_storage = EventLogStorage(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Any) -> Storage:
        return cls.from_local(inst_data=inst_data, **config_value)
