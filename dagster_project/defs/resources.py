"""The resources (benchlake's settings, the judge) and the helpers every Python asset uses to mark,
write and describe its raw tables."""

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from dagster_project.parts import SCHEMA_PART, counted_rows, digest
from dagster_project.settings import JudgeSettings, Settings
from dagster_project.status import mark_started, mark_written, remember_inputs, unchanged
from dagster_project.tables import (
    content_version,
    read_table,
    table_files,
    table_path,
    write_table,
)
from dagster_project.warehouse.previews import HEAD_ROWS, markdown_preview


class BenchlakeSettings(dg.ConfigurableResource):
    """The settings of the contract (`Settings`), typed, as the UI shows them: read once from
    the environment when the code location loads (`resources` below); the CLI and tests build it
    from a `Settings`. Field names are `Settings`' (a test keeps the two equal)."""

    home: str
    rynn_vp_source: str = ""
    rynn_vp_media: Literal["full", "metadata"] = "full"
    video_val_source: str = ""
    video_val_prefix_map: str = ""
    video_val_roots: str = ""
    candidates_dir: str = ""
    judgments_dir: str = ""
    responses_dir: str = ""
    ray_address: str = ""
    judge_prompts: str = ""

    @classmethod
    def from_settings(cls, s: Settings) -> "BenchlakeSettings":
        return cls(**{f.name: str(getattr(s, f.name)) for f in fields(s)})

    def settings(self) -> Settings:
        values = {f.name: getattr(self, f.name) for f in fields(Settings)}
        return Settings(**{**values, "home": Path(self.home)})

    def table_path(self, name: str, part: str | None = None) -> Path:
        return table_path(Path(self.home), name, part)

    def read(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """Raw table `name` with its path columns absolute (see `tables.read_table`)."""
        return read_table(self.table_path(name), Path(self.home), columns)


class JudgeResource(dg.ConfigurableResource):
    """`benchlake judge`'s settings (`settings.JudgeSettings`, JUDGE_*), as the UI shows them: each
    field the text of its variable. The key is a `dg.EnvVar`: resolved from the environment when
    a step needs it, shown in the UI by its name only, never stored with the run."""

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    run_id: str = ""
    reasoning: str = ""
    temperature: str = ""
    max_tokens: str = ""
    seed: str = ""
    concurrency: str = ""
    rpm: str = ""
    timeout_s: str = ""
    budget_usd: str = ""
    prices: str = ""

    def settings(self) -> JudgeSettings:
        return JudgeSettings.from_env({JudgeSettings.env_name(f.name): getattr(self, f.name)
                                       for f in fields(JudgeSettings)})


class JudgeConfig(dg.Config):
    send: bool = Field(default=False, description=(
        "Send the packets to JUDGE_BASE_URL (rvp_judge_job sets it). Off, the step only writes "
        "the ledger again from the journals: materializing everything never calls a model."))


def judge_resource() -> JudgeResource:
    """The judge's settings as they are now (the environment, a `.env` but for the key)."""
    s = JudgeSettings.from_env()
    values = {f.name: str(getattr(s, f.name)) for f in fields(JudgeSettings)
              if f.name != "api_key" and getattr(s, f.name) != f.default}
    key = JudgeSettings.env_name("api_key")
    return JudgeResource(**values, **({"api_key": dg.EnvVar(key)} if os.environ.get(key) else {}))


def raw_key(name: str) -> dg.AssetKey:
    """The asset of raw table `name`: `raw_<name>` (the view users query is `<name>`)."""
    return dg.AssetKey(f"raw_{name}")


def table_name(key: dg.AssetKey) -> str | None:
    """The raw table an asset key writes, None for a view."""
    name = key.path[-1]
    return name.removeprefix("raw_") if name.startswith("raw_") else None


def started(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings) -> None:
    """Mark every raw table this step writes as started by this run, before it
    writes anything: if the run dies, `benchlake_status` says the table is incomplete, whatever
    launched it (CLI, UI, sensor, schedule). Every Python asset calls it first."""
    for key in context.selected_asset_keys:
        if (name := table_name(key)) is not None:
            mark_started(Path(benchlake.home), name, context.run.run_id)


def demo_generator() -> Any:
    """The demo generator (`benchlake_demo`), imported only when a source is left at its demo
    default."""
    import benchlake_demo

    return benchlake_demo


def write_and_describe(
    context: dg.AssetExecutionContext, benchlake: BenchlakeSettings, name: str, table: pa.Table,
    *, inputs: str | None = None, also: Sequence[Path] = (), work: dict[str, int] | None = None,
    **extra: object,
) -> dg.MaterializeResult:
    """Write raw table `name` atomically, mark it written, and return what the UI shows: rows,
    path, a preview, and its data version (a digest of the bytes: equal tables, equal
    versions, so nothing downstream is stale when a rerun changed nothing). With `inputs` (a
    digest of everything the step read), the description is remembered with the files written
    (the table and `also`), for `described_again`; `extra` is then JSON (ints, strings, dicts).
    `work`: counts of what this run did (shown; a run that describes the table again did none)."""
    home = Path(benchlake.home)
    path = benchlake.table_path(name)
    write_table(table, path, home=home)
    mark_written(home, name, context.run.run_id, table.num_rows)
    preview = markdown_preview(table)
    data_version = content_version(home, name)
    if inputs is not None:
        remember_inputs(home, name, inputs, [path, *also], {
            "rows": table.num_rows, "data_version": data_version, "preview": preview,
            "extra": {**extra, **dict.fromkeys(work or {}, 0)}})
    return _described(benchlake, name, table.num_rows, data_version, preview,
                      {**extra, **(work or {})})


def describe_written(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings,
                     name: str, inputs: str, work: dict[str, int],
                     **extra: object) -> dg.MaterializeResult:
    """`write_and_describe` for a table kept in parts (`parts.PartStore`) its step wrote: its
    rows (`parts.counted_rows`: the footers of the new parts), the preview from the first rows
    of its parts, the description remembered with every part."""
    home = Path(benchlake.settings().home)
    files = table_files(home, name)
    counted = counted_rows(home, name)
    rows = sum(counted.values())
    mark_written(home, name, context.run.run_id, rows, parts=counted)
    head = next((b for f in files if f.stem != SCHEMA_PART
                 for b in pq.ParquetFile(f).iter_batches(batch_size=HEAD_ROWS)), None)
    preview = markdown_preview(pa.Table.from_batches([head]) if head is not None
                               else pq.read_schema(files[0]).empty_table(), total=rows)
    version = content_version(home, name)
    remember_inputs(home, name, inputs, files, {
        "rows": rows, "data_version": version, "preview": preview,
        "extra": {**extra, **dict.fromkeys(work, 0)}})
    folder = benchlake.table_path(name, SCHEMA_PART).parent
    return dg.MaterializeResult(
        asset_key=raw_key(name), data_version=dg.DataVersion(version),
        metadata={"dagster/row_count": rows, "path": dg.MetadataValue.path(str(folder)),
                  "preview": dg.MetadataValue.md(preview), **extra, **work})


@functools.cache
def code_identity() -> str:
    """A digest of the names, sizes and modification times of the project's code and rules
    (`dagster_project/**.py`, the dbt project's sources, `assets/`): part of every step's
    `inputs`, so a step remembered by an older code does its work again."""
    from dagster_project.settings import ASSETS_DIR, PROJECT_ROOT, SQL_DIR

    skip = {"target", "logs", "dbt_packages", "__pycache__"}
    files = [*(PROJECT_ROOT / "dagster_project").rglob("*.py"),
             *(f for f in SQL_DIR.rglob("*") if f.suffix in (".sql", ".yml", ".csv")
               and not skip & set(f.relative_to(SQL_DIR).parts)),
             *(f for f in ASSETS_DIR.rglob("*") if f.is_file())]
    return digest(sorted((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))


def step_inputs(*values: object) -> str:
    """The `inputs` digest of a step: what it reads (JSON-able), with `code_identity`."""
    return digest(code_identity(), *values)


def described_again(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings,
                    inputs: str, *names: str) -> list[dg.MaterializeResult] | None:
    """When each raw table of `names` was last written completely from the same `inputs` and its
    files are as written (`status.unchanged`): marked written by this run and described as then,
    nothing read. Else None: the step does its work. Called before `started`."""
    home = Path(benchlake.home)
    done = [unchanged(home, name, inputs) for name in names]
    if any(d is None for d in done):
        return None
    started(context, benchlake)
    results = []
    for name, d in zip(names, done, strict=True):
        assert d is not None
        mark_written(home, name, context.run.run_id, int(d["rows"]))
        results.append(_described(benchlake, name, int(d["rows"]), str(d["data_version"]),
                                  str(d["preview"]), dict(d["extra"])))
    return results


def _described(benchlake: BenchlakeSettings, name: str, rows: int, version: str, preview: str,
               extra: dict) -> dg.MaterializeResult:
    path = benchlake.table_path(name)
    if not path.exists():
        path = path.with_suffix("")  # a table kept in parts: their folder
    metadata: dict[str, object] = {
        "dagster/row_count": rows,
        "path": dg.MetadataValue.path(str(path)),
        "preview": dg.MetadataValue.md(preview),
    }
    metadata.update(extra)
    return dg.MaterializeResult(asset_key=raw_key(name), metadata=metadata,
                                data_version=dg.DataVersion(version))


def parts_result(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings, name: str,
                 **extra: object) -> dg.MaterializeResult:
    """Mark raw table `name`, kept in parts (`parts.PartStore`), written, and say what the UI
    shows: its rows (`parts.counted_rows`: the footers of the parts not counted before), its
    parts, and `extra` (what this run built and removed). Its data version is
    `content_version`: part names and sizes."""
    home = Path(benchlake.home)
    counted = counted_rows(home, name)
    rows = sum(counted.values())
    mark_written(home, name, context.run.run_id, rows, parts=counted)
    return dg.MaterializeResult(
        asset_key=raw_key(name), data_version=dg.DataVersion(content_version(home, name)),
        metadata={"dagster/row_count": rows, "parts": len(counted),
                  "path": dg.MetadataValue.path(str(benchlake.table_path(name, "_").parent)),
                  **extra})


def drop_folder_sensor_result(
    source: dg.AssetKey, root: Path, cursor: str | None, setting: str, home: Path,
    versions_table: str, stat_cache: Path) -> dg.SensorResult | dg.SkipReason:
    """The shared body of the drop-folder sensors: the folder `root` observed (its data version
    recorded on the source asset `source`, so the UI shows what it makes stale), and, when its
    content changed since the cursor (path → content hash), one run request keyed by the change.
    A sensor without a cursor yet (a new UI, a new Dagster home) starts from what is already
    ingested, the current versions of `root` in the raw versions table `versions_table`, so work
    done by `benchlake materialize` is not launched again. Files are hashed once: the
    file-identity cache at `stat_cache` (`Settings.file_cache`) knows the digest of every file
    that did not change."""
    from dagster_project.dropfolder import changed_files, ingested_cursor, listing_version

    if not root.is_dir():
        return dg.SkipReason(f"{setting} {root} does not exist")
    if cursor is None:
        cursor = ingested_cursor(table_path(home, versions_table), root, home)
    changed, new_cursor, run_key = changed_files(root, cursor, stat_cache)
    observed = dg.AssetObservation(asset_key=source, tags={
        "dagster/data_version": listing_version(json.loads(new_cursor))})
    if not changed:
        return dg.SensorResult(skip_reason=f"no new or changed files in {setting}",
                               cursor=new_cursor, asset_events=[observed])
    tags = {"benchlake/changed_files": ", ".join(changed)[:200]}
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=run_key, tags=tags)],
                           cursor=new_cursor, asset_events=[observed])


@dg.definitions
def resources() -> dg.Definitions:
    # The environment is read here, once, when the code location loads; never in asset bodies.
    return dg.Definitions(resources={
        "benchlake": BenchlakeSettings.from_settings(Settings.from_env()),
        "judge": judge_resource(),
    })
