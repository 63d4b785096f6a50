"""Running the asset graph in-process with given settings (used by the CLI and the tests)."""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings
from dagster_project.partitions import sync_dynamic_partitions
from dagster_project.settings import Settings
from dagster_project.status import mark_started

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
    """The runs one `materialize` call made (unpartitioned assets, one run per partition set)
    and the catalog it published, with the few accessors the CLI and tests need."""

    def __init__(self, results: list[dg.ExecuteInProcessResult],
                 catalog_skipped: dict[str, str] | None = None) -> None:
        self.results = results
        # views the published catalog left out, with why (their tables are not materialized)
        self.catalog_skipped = catalog_skipped or {}

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

    def failures(self) -> list[Failed]:
        """What failed, per step: the assets it writes, the first line of the underlying error
        and the input file it concerned when known (a `dg.Failure` with `input_file` metadata,
        or an OSError's file name)."""
        out = []
        for result in self.results:
            job = result.job_def
            for event in result.all_events:
                if not event.is_step_failure:
                    continue
                data = event.event_specific_data
                error = data.error
                while error is not None and error.cause is not None:
                    error = error.cause  # past Dagster's wrapper, to what the asset raised
                message = _first_line(error.message if error else "unknown error")
                input_file = None
                if data.user_failure_data is not None:
                    message = _first_line(data.user_failure_data.description or message)
                    entry = data.user_failure_data.metadata.get("input_file")
                    input_file = str(entry.value) if entry is not None else None
                if input_file is None:  # an OSError and its kind name the file: "...: /path"
                    named = _NAMED_PATH.search(message)
                    input_file = named.group(1) if named else None
                layer = job.asset_layer
                assets = sorted(
                    k.to_user_string() for k in layer.get_selected_entity_keys_for_node(
                        event.node_handle) if isinstance(k, dg.AssetKey)
                ) if event.node_handle else []
                out.append(Failed(event.step_key or "?", assets or [event.step_key or "?"],
                                  message, input_file))
        return out


@dataclass(frozen=True)
class Failed:
    step: str
    assets: list[str]
    message: str
    input_file: str | None


_NAMED_PATH = re.compile(r"(?:^|[\s'\"(])(/[^\s'\":]+)")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else "unknown error"
    # "FileNotFoundError: CANDIDATES_DIR ...": keep the class name, it says what kind of problem
    return first.removeprefix("dagster._core.definitions.events.Failure: ")


def whole_assets(graph: dg.AssetGraph, keys: set[dg.AssetKey]) -> set[dg.AssetKey]:
    """`keys` plus the sibling keys of every multi-asset that cannot run a subset: one asset
    function writes all of them together, so a selection of one runs the whole function."""
    out = set(keys)
    for key in keys:
        assets_def = graph.get(key).assets_def
        if not assets_def.can_subset:
            out |= set(assets_def.keys)
    return out


_BARE_NAME = re.compile(r"(?<![\w/:\"-])([A-Za-z_]\w*)(?![\w/:\"-])")


def with_table_names(graph: dg.AssetGraph, select: str) -> str:
    """`select` with every bare table name (`rvp_snapshot`) written as its asset key
    (`raw_rvp_snapshot`): a name that is not itself a key but ends exactly one key."""
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    by_name: dict[str, list[str]] = {}
    for key in keys:
        by_name.setdefault(key.rsplit("/", 1)[-1], []).append(key)

    def expand(match: re.Match) -> str:
        name = match.group(1)
        owners = by_name.get(name, [])
        return owners[0] if name not in keys and len(owners) == 1 else name

    return _BARE_NAME.sub(expand, select)


def resolve_selection(graph: dg.AssetGraph, select: str | None) -> set[dg.AssetKey]:
    """The asset keys `select` (Dagster selection syntax, where a raw table may also be named
    without its `raw/` prefix; None: everything but the reports) names, widened to whole
    multi-assets."""
    # "Everything" leaves out the report exports: they are written by `benchlake export`, the
    # rescoring job and its schedule, or an explicit selection such as `group:reports`.
    selection = (dg.AssetSelection.all() - dg.AssetSelection.groups("reports") if not select
                 else dg.AssetSelection.from_string(with_table_names(graph, select)))
    try:
        keys = selection.resolve(graph)
    except dg.DagsterInvalidSubsetError as error:
        raise ValueError(f"--select {select!r}: {_first_line(str(error))}") from None
    # External assets (tables several stages write, the run markers) are not run themselves.
    external = {k for k in keys if not graph.get(k).is_executable}
    keys = set(keys) - external
    if select and external and not keys:
        names = ", ".join(sorted(k.to_user_string() for k in external))
        raise ValueError(f"--select {select!r} names only tables written by other assets "
                         f"({names}); select the assets that write them")
    if select and not keys:
        known = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
        raise ValueError(f"--select {select!r} matches no asset; assets: {', '.join(known)}")
    return whole_assets(graph, set(keys))


MATERIALIZE_JOB = "benchlake_materialize"


def materialize(
    settings: Settings,
    select: str | None = None,
    *,
    instance: dg.DagsterInstance | None = None,
    raise_on_error: bool = True,
    log_level: str = "INFO",
    run_config: dict | None = None,
    launched_by: str = "python",
) -> Outcome:
    """Materialize `select` (Dagster selection syntax; default everything but the reports),
    then publish the catalog file (`warehouse.views.publish_catalog`).

    Runs go in waves (`plan_waves`): one run for every unpartitioned asset that does not wait
    for a partitioned one, then one run per partitioned set over all its partitions (a single-run
    range; the assets parallelize inside), and again. Every run is the job
    `benchlake_materialize`, tagged with what launched it (`benchlake/launched_by`) and the
    selection (`benchlake/select`). Demo inputs are built by the acquisition assets themselves,
    only for the sources left at their defaults, so a fresh BENCHLAKE_HOME works with any
    selection."""
    from dagster_project.defs.resources import dbt_resource
    from dagster_project.warehouse.views import publish_catalog

    defs = definitions()
    graph = defs.resolve_asset_graph()
    keys = resolve_selection(graph, select)
    instance = instance or dg.DagsterInstance.ephemeral()
    config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    config.update(run_config or {})
    resources = {"benchlake": BenchlakeSettings.from_settings(settings), "dbt": dbt_resource()}
    base_tags = {"benchlake/launched_by": launched_by, "benchlake/select": select or "(all)"}

    def run(asset_keys: frozenset[dg.AssetKey], tags: dict[str, str] | None = None,
            partitions: list[str] | None = None):
        job = dg.define_asset_job(MATERIALIZE_JOB, selection=dg.AssetSelection.assets(*asset_keys))
        job_defs = dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=[job],
                                  resources=resources)
        run_id = str(uuid.uuid4())  # what Dagster would pick; known before the run starts
        # Announce the raw tables this run will write, so a run that dies half-way shows
        # (status.py); views hold no data of their own.
        for key in asset_keys:
            if key.path[0].startswith("raw_"):
                mark_started(settings.home, key.path[-1].removeprefix("raw_"), partitions or [None], run_id)
        return job_defs.resolve_job_def(MATERIALIZE_JOB).execute_in_process(
            run_config=config, instance=instance, raise_on_error=raise_on_error,
            tags={**base_tags, **(tags or {})}, run_id=run_id)

    results: list[dg.ExecuteInProcessResult] = []
    for wave in plan_waves(graph, keys):
        if not all(r.success for r in results):
            break
        if wave.partitions is None:
            results.append(run(wave.keys))
            continue
        if isinstance(wave.partitions, dg.DynamicPartitionsDefinition):
            sync_dynamic_partitions(instance, settings)
            partition_keys = instance.get_dynamic_partitions(wave.partitions.name)
        else:
            partition_keys = list(wave.partitions.get_partition_keys())
        if partition_keys:
            results.append(run(wave.keys, {
                "dagster/asset_partition_range_start": partition_keys[0],
                "dagster/asset_partition_range_end": partition_keys[-1],
            }, partition_keys))
    # Also after a failure: the catalog then shows what did land.
    return Outcome(results, publish_catalog(settings.home))


@dataclass(frozen=True)
class Wave:
    """One run of `materialize`: assets with one partitions definition (or none)."""

    keys: frozenset[dg.AssetKey]
    partitions: dg.PartitionsDefinition | None


def plan_waves(graph: dg.AssetGraph, keys: set[dg.AssetKey]) -> list[Wave]:
    """The runs that materialize `keys` in dependency order, as few as the partitions allow:
    every unpartitioned asset that does not wait for a remaining partitioned one (Dagster orders
    them inside the run, the dbt models in as many steps as the graph needs), then each
    partitioned set whose remaining ancestors are all in it, and again."""
    def pdef_of(key: dg.AssetKey) -> dg.PartitionsDefinition | None:
        return graph.get(key).partitions_def

    ancestors: dict[dg.AssetKey, set[dg.AssetKey]] = {}

    def ancestors_of(key: dg.AssetKey) -> set[dg.AssetKey]:
        if key not in ancestors:
            found: set[dg.AssetKey] = set()
            for parent in graph.get(key).parent_keys:
                found |= {parent, *ancestors_of(parent)}
            ancestors[key] = found
        return ancestors[key]

    remaining, waves = set(keys), []
    while remaining:
        partitioned = {k for k in remaining if pdef_of(k) is not None}
        plain = {k for k in remaining - partitioned if not (ancestors_of(k) & partitioned)}
        if plain:
            waves.append(Wave(frozenset(plain), None))
            remaining -= plain
        groups: dict[str, set[dg.AssetKey]] = {}
        for k in partitioned:
            groups.setdefault(str(pdef_of(k)), set()).add(k)
        ready = [g for g in groups.values()
                 if not any(ancestors_of(k) & (remaining - g) for k in g)]
        for group in ready:
            waves.append(Wave(frozenset(group), pdef_of(next(iter(group)))))
            remaining -= group
        if not plain and not ready:
            raise RuntimeError(f"cannot order assets {sorted(map(str, remaining))}")
    return waves


def rvp_evidence_job() -> dg.JobDefinition:
    """Module-level accessor so `dg.reconstructable` can rebuild the job in other processes."""
    return definitions().resolve_job_def("rvp_evidence_job")
