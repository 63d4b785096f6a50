"""Running the asset graph in-process with given settings (used by the CLI and the tests)."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from dagster_project.resources import BenchlakeSettings
from dagster_project.settings import Settings

CATALOG_ASSET = "benchlake_catalog"

_DAGSTER_YAML = """\
# Written by benchlake. Runs launched from the UI start at once in their own process (no queue
# waiting for a daemon); sensors and schedules run when `dagster-daemon` (or `benchlake ui`) runs.
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""


def definitions() -> dg.Definitions:
    from dagster_project.definitions import defs

    return defs


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The persistent Dagster instance under `$BENCHLAKE_HOME/dagster` (history survives)."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(_DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    return dg.DagsterInstance.from_config(str(home))


def materialize(
    settings: Settings,
    select: str | None = None,
    *,
    instance: dg.DagsterInstance | None = None,
    raise_on_error: bool = True,
    log_level: str = "INFO",
) -> dg.ExecuteInProcessResult:
    """Materialize `select` (Dagster selection syntax; default everything), then the catalog.

    Demo inputs are built by the acquisition assets themselves, only for the sources left at
    their defaults, so a fresh BENCHLAKE_HOME works with any selection."""
    defs = definitions()
    selection = dg.AssetSelection.all() if not select else dg.AssetSelection.from_string(select)
    if select and not selection.resolve(defs.resolve_asset_graph()):
        known = sorted(k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys())
        raise ValueError(f"--select {select!r} matches no asset; assets: {', '.join(known)}")
    selection = selection | dg.AssetSelection.assets(CATALOG_ASSET)
    return dg.materialize(
        [*defs.assets, *defs.asset_checks],  # type: ignore[list-item]
        selection=selection,
        resources={"benchlake": BenchlakeSettings.from_settings(settings)},
        instance=instance,
        raise_on_error=raise_on_error,
        run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
    )


def table_path(settings: Settings, name: str) -> Path:
    return settings.tables_dir / f"{name}.parquet"
