"""The resources (benchlake's settings, dbt) and the helpers every asset uses to write a raw
table and describe it to the UI."""


import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
from dagster_dbt import DbtCliResource

from dagster_project.settings import Settings
from dagster_project.status import mark_written
from dagster_project.tables import markdown_preview, read_table, table_path, write_table
from dagster_project.warehouse.project import SQL_DIR, dbt_executable


class BenchlakeSettings(dg.ConfigurableResource):
    """Where benchlake reads and writes: the settings (`Settings`) by their environment names,
    as the UI shows them. Built from the environment once (`defs/resources.py`); tests and the
    runner build it from a `Settings`."""

    values: dict[str, str]

    @classmethod
    def from_settings(cls, s: Settings) -> "BenchlakeSettings":
        return cls(values=s.as_env())

    def settings(self) -> Settings:
        return Settings.from_env(self.values)

    def table_path(self, name: str, part: str | None = None) -> Path:
        return table_path(self.settings().home, name, part)

    def read(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """Raw table `name` with its path columns absolute (see `tables.read_table`)."""
        return read_table(self.table_path(name), self.settings().home, columns)


def raw_key(name: str) -> dg.AssetKey:
    """The asset of raw table `name`: `raw_<name>` (the view users query is `<name>`)."""
    return dg.AssetKey(f"raw_{name}")


def write_and_describe(
    benchlake: "BenchlakeSettings", name: str, table: pa.Table, **extra: object
) -> dg.MaterializeResult:
    """Write table `name` atomically and return the result the UI shows: rows, path, a
    preview."""
    path = benchlake.table_path(name)
    write_table(table, path, home=benchlake.settings().home)
    record_written(benchlake, name, None, table.num_rows)
    metadata: dict[str, object] = {
        "dagster/row_count": table.num_rows,
        "path": dg.MetadataValue.path(str(path)),
        "preview": dg.MetadataValue.md(markdown_preview(table)),
    }
    metadata.update(extra)
    return dg.MaterializeResult(asset_key=raw_key(name), metadata=metadata)


def partition_metadata(home: Path, name: str, part: str, rows: int) -> dict[str, object]:
    """What the UI shows for one partition of raw table `name`: its own rows, file, preview."""
    path = table_path(home, name, part)
    return {"dagster/row_count": rows, "path": dg.MetadataValue.path(str(path)),
            "preview": dg.MetadataValue.md(markdown_preview(read_table(path, home)))}


def record_written(benchlake: "BenchlakeSettings", name: str, partition: str | None,
                   rows: int, run_id: str | None = None) -> None:
    """Mark `name` (its `partition`) as written whole by the current run (`status.py`)."""
    if run_id is None:
        try:
            run_id = dg.AssetExecutionContext.get().run.run_id
        except dg.DagsterInvariantViolationError:  # called outside a run (a test, a notebook)
            return
    mark_written(benchlake.settings().home, name, partition, run_id, rows)


def drop_folder_sensor_result(
    root: Path, cursor: str | None, setting: str, home: Path, versions_table: str,
    stat_cache: Path) -> dg.SensorResult | dg.SkipReason:
    """The shared body of the drop-folder sensors: new content under `root` (compared with the
    cursor of path → content hash) gives one run request keyed by the change. A sensor without a
    cursor yet (a new UI, a new Dagster home) starts from what is already ingested, the current
    versions of `root` in the raw versions table `versions_table`, so work done by `benchlake
    materialize` is not launched again. Files are hashed once: the `stat_cache` knows the digest
    of every file whose size and mtime did not change."""
    from dagster_project.dropfolder import changed_files, ingested_cursor

    if not root.is_dir():
        return dg.SkipReason(f"{setting} {root} does not exist")
    if cursor is None:
        cursor = ingested_cursor(table_path(home, versions_table), root, home)
    changed, new_cursor, run_key = changed_files(root, cursor, stat_cache)
    if not changed:
        return dg.SensorResult(skip_reason=f"no new or changed files in {setting}",
                               cursor=new_cursor)
    tags = {"benchlake/changed_files": ", ".join(changed)[:200]}
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=run_key, tags=tags)],
                           cursor=new_cursor)


def dbt_resource() -> DbtCliResource:
    """dbt of this environment over the project in `sql/`."""
    return DbtCliResource(project_dir=os.fspath(SQL_DIR), profiles_dir=os.fspath(SQL_DIR),
                          dbt_executable=dbt_executable())


@dg.definitions
def resources() -> dg.Definitions:
    # Environment switching happens here, once, not inside asset bodies.
    return dg.Definitions(resources={
        "benchlake": BenchlakeSettings.from_settings(Settings.from_env()),
        "dbt": dbt_resource(),
    })
