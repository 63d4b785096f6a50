"""The Dagster-facing wrappers: the settings resource and the materialization result helper."""


from pathlib import Path

import dagster as dg
import pyarrow as pa

from dagster_project.settings import Settings
from dagster_project.status import mark_written
from dagster_project.tables import markdown_preview, read_table, write_table


class BenchlakeSettings(dg.ConfigurableResource):
    """Where benchlake reads and writes. Built from the environment (see `Settings.from_env`);
    tests build it directly with a temporary `home`."""

    home: str
    rynn_vp_source: str = ""
    rynn_vp_media: str = "full"
    video_val_source: str = ""
    video_val_prefix_map: str = ""
    video_val_roots: str = ""
    candidates_dir: str = ""
    judgments_dir: str = ""
    responses_dir: str = ""

    @classmethod
    def from_settings(cls, s: Settings) -> "BenchlakeSettings":
        return cls(
            home=str(s.home),
            rynn_vp_source=s.rynn_vp_source,
            rynn_vp_media=s.rynn_vp_media,
            video_val_source=s.video_val_source,
            video_val_prefix_map=s.video_val_prefix_map,
            video_val_roots=s.video_val_roots,
            candidates_dir=s.candidates_dir,
            judgments_dir=s.judgments_dir,
            responses_dir=s.responses_dir,
        )

    def settings(self) -> Settings:
        return Settings(
            home=Path(self.home).resolve(),
            rynn_vp_source=self.rynn_vp_source,
            rynn_vp_media=self.rynn_vp_media,
            video_val_source=self.video_val_source,
            video_val_prefix_map=self.video_val_prefix_map,
            video_val_roots=self.video_val_roots,
            candidates_dir=self.candidates_dir,
            judgments_dir=self.judgments_dir,
            responses_dir=self.responses_dir,
        )

    def table_path(self, name: str) -> Path:
        return self.settings().tables_dir / f"{name}.parquet"

    def read(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """Table `name` with its path columns absolute (see `tables.read_table`)."""
        return read_table(self.table_path(name), self.settings().home, columns)


def write_and_describe(
    benchlake: "BenchlakeSettings", name: str, table: pa.Table, *, asset_key: str | None = None,
    **extra: object
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
    return dg.MaterializeResult(asset_key=asset_key, metadata=metadata)


def record_written(benchlake: "BenchlakeSettings", name: str, partition: str | None,
                   rows: int, run_id: str | None = None) -> None:
    """Mark `name` (its `partition`) as written whole by the current run (`status.py`)."""
    if run_id is None:
        try:
            run_id = dg.AssetExecutionContext.get().run.run_id
        except dg.DagsterInvariantViolationError:  # called outside a run (a test, a notebook)
            return
    mark_written(benchlake.settings().tables_dir, name, partition, run_id, rows)


def drop_folder_sensor_result(
    root: Path, cursor: str | None, setting: str
) -> dg.SensorResult | dg.SkipReason:
    """The shared body of the drop-folder sensors: new content under `root` (compared with the
    cursor of path → content hash) gives one run request keyed by the change."""
    from dagster_project.dropfolder import changed_files

    if not root.is_dir():
        return dg.SkipReason(f"{setting} {root} does not exist")
    changed, new_cursor, run_key = changed_files(root, cursor)
    if not changed:
        return dg.SkipReason(f"no new or changed files in {setting}")
    tags = {"benchlake/changed_files": ", ".join(changed)[:200]}
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=run_key, tags=tags)],
                           cursor=new_cursor)
