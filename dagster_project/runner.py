"""Running the asset graph in-process with given settings (used by the CLI and the tests)."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from dagster_project.partitions import sync_dynamic_partitions
from dagster_project.resources import BenchlakeSettings
from dagster_project.settings import Settings

CATALOG_ASSET = "benchlake_catalog"

_YAML_MARKER = "# Written by benchlake."
_DAGSTER_YAML = f"""\
{_YAML_MARKER} Rewritten while this first line stays; delete it to keep your own edits.
# Storage: the default SQLite files in this folder (run history, event logs, schedules), so
# history survives restarts. Runs launched from the UI start at once in their own process (no
# queue waiting for the run-queue daemon); sensors and the schedule run when the daemon runs
# (`benchlake ui` starts it, as `dagster dev` does). No telemetry, no sign-up pop-up in the UI.
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
nux:
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
    current = config.read_text() if config.exists() else None
    if current is None or (current.startswith(_YAML_MARKER) and current != _DAGSTER_YAML):
        config.write_text(_DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    return dg.DagsterInstance.from_config(str(home))


class Outcome:
    """The runs one `materialize` call made (unpartitioned assets, one run per partition set,
    the catalog), with the few accessors the CLI and tests need."""

    def __init__(self, results: list[dg.ExecuteInProcessResult]) -> None:
        self.results = results

    @property
    def success(self) -> bool:
        return all(r.success for r in self.results)

    @property
    def all_events(self) -> list:
        return [e for r in self.results for e in r.all_events]

    def get_asset_materialization_events(self) -> list:
        return [e for r in self.results for e in r.get_asset_materialization_events()]

    def get_asset_check_evaluations(self) -> list:
        return [e for r in self.results for e in r.get_asset_check_evaluations()]


def materialize(
    settings: Settings,
    select: str | None = None,
    *,
    instance: dg.DagsterInstance | None = None,
    raise_on_error: bool = True,
    log_level: str = "INFO",
    run_config: dict | None = None,
) -> Outcome:
    """Materialize `select` (Dagster selection syntax; default everything), then the catalog.

    Runs go in waves along the graph: one run for the unpartitioned assets whose selected
    ancestors are done, then one run per partitioned set over all its partitions (a single-run
    range; the assets parallelize inside), and again. The catalog is always included, so it is
    rebuilt after whatever was selected.
    Demo inputs are built by the acquisition assets themselves, only for the sources left at
    their defaults, so a fresh BENCHLAKE_HOME works with any selection."""
    defs = definitions()
    graph = defs.resolve_asset_graph()
    # "Everything" leaves out the report exports: they are written by `benchlake export`, the
    # rescoring job and its schedule, or an explicit selection such as `group:reports`.
    selection = (dg.AssetSelection.all() - dg.AssetSelection.groups("reports") if not select
                 else dg.AssetSelection.from_string(select))
    keys = selection.resolve(graph)
    if select and not keys:
        known = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
        raise ValueError(f"--select {select!r} matches no asset; assets: {', '.join(known)}")
    instance = instance or dg.DagsterInstance.ephemeral()
    catalog = dg.AssetKey(CATALOG_ASSET)
    config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    config.update(run_config or {})

    def run(asset_keys: set[dg.AssetKey], tags: dict[str, str] | None = None):
        return dg.materialize(
            [*defs.assets, *defs.asset_checks],  # type: ignore[list-item]
            selection=dg.AssetSelection.assets(*asset_keys),
            resources={"benchlake": BenchlakeSettings.from_settings(settings)},
            instance=instance,
            raise_on_error=raise_on_error,
            run_config=config,
            tags=tags,
        )

    def pdef_of(key: dg.AssetKey) -> dg.PartitionsDefinition | None:
        return graph.get(key).partitions_def

    remaining = set(keys) | {catalog}  # the catalog is always rebuilt, after its inputs
    ancestors: dict[dg.AssetKey, set[dg.AssetKey]] = {}

    def ancestors_of(key: dg.AssetKey) -> set[dg.AssetKey]:
        if key not in ancestors:
            found: set[dg.AssetKey] = set()
            for parent in graph.get(key).parent_keys:
                found |= {parent, *ancestors_of(parent)}
            ancestors[key] = found
        return ancestors[key]

    # Waves: unpartitioned assets whose selected ancestors are all done, then each partition set
    # whose selected ancestors are done (one run over all its partitions), and again, until done.
    results: list[dg.ExecuteInProcessResult] = []
    while remaining and all(r.success for r in results):
        progressed = False
        plain = {k for k in remaining if pdef_of(k) is None
                 and not (ancestors_of(k) & remaining)}
        if plain:
            results.append(run(plain))
            remaining -= plain
            progressed = True
        groups: dict[str, set[dg.AssetKey]] = {}
        for k in remaining:
            if pdef_of(k) is not None:
                groups.setdefault(str(pdef_of(k)), set()).add(k)
        for group in groups.values():
            if any(ancestors_of(k) & (remaining - group) for k in group) or not all(
                    r.success for r in results):
                continue
            pdef = pdef_of(next(iter(group)))
            if isinstance(pdef, dg.DynamicPartitionsDefinition):
                sync_dynamic_partitions(instance, settings)
                partition_keys = instance.get_dynamic_partitions(pdef.name)
            else:
                partition_keys = list(pdef.get_partition_keys())
            if partition_keys:
                results.append(run(group, {
                    "dagster/asset_partition_range_start": partition_keys[0],
                    "dagster/asset_partition_range_end": partition_keys[-1],
                }))
            remaining -= group
            progressed = True
        if not progressed:
            raise RuntimeError(f"cannot order assets {sorted(map(str, remaining))}")
    if catalog in remaining:  # a run failed: still expose what did land
        results.append(run({catalog}))
    return Outcome(results)


def table_path(settings: Settings, name: str) -> Path:
    return settings.tables_dir / f"{name}.parquet"


def rvp_evidence_job() -> dg.JobDefinition:
    """Module-level accessor so `dg.reconstructable` can rebuild the job in other processes."""
    return definitions().resolve_job_def("rvp_evidence_job")
