"""`benchlake materialize` as a Dagster run: the selection, in Dagster's selection syntax, run as
one run of the code location's asset job, the one the UI's "Materialize" button launches, so the
UI lists the run, links its job and can re-execute it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import dagster as dg

from dagster_project.settings import Settings

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
# What `materialize` runs when no selection is given: everything but the report exports, which
# `benchlake export`, the rescoring job and its schedule write (or `--select group:reports`).
DEFAULT_SELECTION = "not group:reports"


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


def selected_keys(defs: dg.Definitions, select: str | None) -> list[dg.AssetKey]:
    """The executable assets `select` names (default: `DEFAULT_SELECTION`), with the whole of
    every multi-asset that cannot run a part of itself."""
    graph = defs.resolve_asset_graph()
    text = select or DEFAULT_SELECTION
    try:
        keys = dg.AssetSelection.from_string(text).resolve(graph)
    except Exception as error:  # noqa: BLE001 - a syntax error or an unknown key
        raise ValueError(f"--select {text!r}: {_first_line(str(error))}") from None
    runnable = {k for k in keys if graph.get(k).is_executable}
    if not runnable:
        names = sorted(k.to_user_string() for k in keys)
        raise ValueError(f"--select {text!r} matches no asset that can be materialized"
                         + (f" (only {', '.join(names)}, written by other assets)" if names
                            else "; `benchlake ui` lists them, e.g. key:raw_rvp_media+, "
                            "group:video_val, key:rvp_leaderboard"))
    for key in list(runnable):
        node = graph.get(key)
        if not node.assets_def.can_subset:
            runnable |= set(node.assets_def.keys)
    # The sources read are observed first (cheap: file identities), so each materialization
    # records the version of what it read and the UI can tell when it is stale.
    for key in list(runnable):
        runnable |= {p for p in graph.get(key).parent_keys if graph.get(p).is_observable}
    return sorted(runnable)


def materialize(
    settings: Settings,
    select: str | None = None,
    *,
    instance: dg.DagsterInstance | None = None,
    raise_on_error: bool = True,
    run_config: dict | None = None,
    launched_by: str = "python",
    progress: bool = False,
    checks: bool = True,
) -> Outcome:
    """Materialize `select` (Dagster selection syntax; default everything but the exports) and
    run every check of what it selects: one run of the asset job, tagged with what launched it
    (`benchlake/launched_by`) and the selection. With `progress`, the run's steps are told on
    stderr (the `benchlake_progress` logger) instead of Dagster's console log. `checks=False`
    (tests of the tables themselves) builds what is selected without running any check."""
    from dagster_project.defs.resources import BenchlakeSettings, dbt_resource

    loaded = definitions()
    # The code location's definitions with these settings as the resource (the code location
    # reads the same ones from the environment): the same asset job, the same run as the UI's.
    defs = dg.Definitions(
        assets=loaded.assets, asset_checks=loaded.asset_checks, jobs=loaded.jobs,
        sensors=loaded.sensors, schedules=loaded.schedules, loggers=loaded.loggers,
        resources={**(loaded.resources or {}),
                   "benchlake": BenchlakeSettings.from_settings(settings), "dbt": dbt_resource()})
    keys = selected_keys(defs, select)
    job = defs.resolve_implicit_global_asset_job_def()
    config = dict(run_config or {})
    if progress:
        config["loggers"] = {"benchlake_progress": {}}
    if not checks:  # the subset job holds the selection (selecting again re-adds checks)
        job, keys = job.get_subset(asset_selection=set(keys), asset_check_selection=set()), None
    result = job.execute_in_process(
        asset_selection=keys, instance=instance or dg.DagsterInstance.ephemeral(),
        run_config=config, raise_on_error=raise_on_error,
        tags={"benchlake/launched_by": launched_by, "benchlake/select": select or "(all)"})
    return Outcome(result)


class Outcome:
    """The run one `materialize` call made, with the few accessors the CLI and tests need."""

    def __init__(self, result: dg.ExecuteInProcessResult) -> None:
        self.result = result

    @property
    def success(self) -> bool:
        return self.result.success

    @property
    def run_id(self) -> str:
        return self.result.run_id

    @property
    def all_events(self) -> list:
        return list(self.result.all_events)

    def get_asset_materialization_events(self) -> list:
        return list(self.result.get_asset_materialization_events())

    def get_asset_check_evaluations(self) -> list:
        return list(self.result.get_asset_check_evaluations())

    def failures(self) -> list[Failed]:
        """What failed, per step: the assets it writes, the first line of the underlying error
        and the input file it concerned when known (a `dg.Failure` with `input_file` metadata,
        or an OSError's file name)."""
        out = []
        layer = self.result.job_def.asset_layer
        for event in self.result.all_events:
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
