"""`benchlake materialize` as a Dagster run: the selection, in Dagster's selection syntax, run as
one run of the code location's asset job, the one the UI's "Materialize" button launches, so the
UI lists the run, links its job and can re-execute it."""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from typing import Any

import dagster as dg

from dagster_project.settings import Settings

_YAML_MARKER = "# Written by benchlake."
_DAGSTER_YAML = """\
{marker} Rewritten while this first line stays; delete it to keep your own edits.
# Storage: the default SQLite files in this folder (run history, event logs, schedules), so
# history survives restarts, written by dagster_project/instance_storage.py (fewer syncs and
# connections per event than Dagster's own; same files). Runs launched from the UI start at once
# in their own process (no queue waiting for the run-queue daemon); sensors and the schedule run
# when the daemon runs (`benchlake ui` starts it, as `dagster dev` does). No telemetry, no
# sign-up pop-up in the UI. base_dir is this folder (rewritten if the home moves), so the
# instance opens with or without DAGSTER_HOME set.
storage:
  custom:
    module: dagster_project.instance_storage
    class: Storage
    config:
      base_dir: {base_dir}
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
    """The code location's definitions, the dbt manifest they are built from prepared first
    (parsed again only when `sql/` changed)."""
    from dagster_project.warehouse.project import prepare_manifest

    prepare_manifest()
    from dagster_project.definitions import defs

    return defs


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The persistent Dagster instance under `$BENCHLAKE_HOME/dagster` (history survives)."""
    from dagster_project.instance_storage import BATCH_SIZE

    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    current = config.read_text() if config.exists() else None
    # a JSON string is a YAML string: any path, quoted as it must be
    wanted = _DAGSTER_YAML.format(marker=_YAML_MARKER, base_dir=json.dumps(str(home.resolve())))
    if current is None or (current.startswith(_YAML_MARKER) and current != wanted):
        config.write_text(wanted)
    os.environ["DAGSTER_HOME"] = str(home)
    # a run's planned events as one batch (`instance_storage.EventLogStorage.store_event_batch`)
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(BATCH_SIZE))
    return dg.DagsterInstance.from_config(str(home))


def selected_keys(defs: dg.Definitions, select: str | None) -> list[dg.AssetKey]:
    """The executable assets `select` names (default: `DEFAULT_SELECTION`), with the whole of
    every multi-asset that cannot run a part of itself."""
    from dagster_project.warehouse.catalog import nodes, seeds

    graph = defs.resolve_asset_graph()
    text = select or DEFAULT_SELECTION
    try:  # the observed sources count as assets too (`key:judgments_dir+`)
        keys = dg.AssetSelection.from_string(text, include_sources=True).resolve(graph)
    except Exception as error:  # noqa: BLE001 - a syntax error or an unknown key
        keys, problem = set(), _first_line(str(error))
        if "no AssetsDefinition" not in problem:  # an unknown key is explained below
            raise ValueError(f"--select {text!r}: {problem}") from None
    unknown = _unknown_names(text, graph)
    if unknown:  # even beside names that exist: a typo must not shrink the run silently
        raise ValueError(f"--select {text!r}: " + "; ".join(unknown)
                         + "; `benchlake ui` lists every asset")
    runnable = {k for k in keys if graph.get(k).is_executable}
    if not runnable:
        names = sorted(k.to_user_string() for k in keys)
        raise ValueError(f"--select {text!r} matches no asset that can be materialized"
                         + (f" (only {_few(names)}, written by other assets)" if names
                            else "; `benchlake ui` lists them, e.g. key:raw_rvp_media+, "
                            "group:video_val, key:rvp_leaderboard"))
    for key in list(runnable):
        node = graph.get(key)
        if not node.assets_def.can_subset:
            runnable |= set(node.assets_def.keys)
    # The sources read are observed first (cheap: file identities), so each materialization
    # records the version of what it read and the UI can tell when it is stale. The rule tables
    # (dbt seeds) the selected assets read and the views the selected views read come along,
    # so a view never misses one: the step builds only those not yet built here as now defined
    # (`catalog.definitions`), the others cost nothing.
    sql = {dg.AssetKey(n.name) for n in nodes()}
    rules = {dg.AssetKey(name) for name in seeds()}
    for key in list(runnable):
        runnable |= {p for p in graph.get(key).parent_keys if graph.get(p).is_observable}
    runnable |= rules & {a for k in list(runnable) for a in _ancestors(graph, k)}
    runnable |= {a for k in runnable & sql for a in _ancestors(graph, k, sql)}
    return sorted(runnable)


_SELECTION_NAME = re.compile(r'(?:(\w+):)?"?([A-Za-z_][\w/.*-]*)"?')


def _unknown_names(text: str, graph: Any) -> list[str]:
    """What `text` names that no asset or group is, each with at most three close matches
    ("no asset rvp_leaderbord; did you mean rvp_leaderboard?")."""
    import difflib

    keys = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
    groups = sorted({graph.get(k).group_name for k in graph.get_all_asset_keys()} - {None})
    problems = []
    for kind, name in _SELECTION_NAME.findall(text):
        if kind not in ("", "key", "group") or name in ("and", "or", "not") or "*" in name:
            continue
        known, what = (groups, "group") if kind == "group" else (keys, "asset")
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        problems.append(f"no {what} {name}" + (f"; did you mean {', '.join(close)}?" if close
                                               else ""))
    return problems


def _few(names: list[str], n: int = 5) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _ancestors(graph: Any, key: dg.AssetKey, within: set[dg.AssetKey] | None = None
               ) -> set[dg.AssetKey]:
    """The ancestors of `key` (reached through assets of `within` only, if given)."""
    seen: set[dg.AssetKey] = set()
    todo = [key]
    while todo:
        for parent in graph.get(todo.pop()).parent_keys:
            if parent not in seen and (within is None or parent in within):
                seen.add(parent)
                todo.append(parent)
    return seen


# The code location as `benchlake ui` (`dagster dev -m dagster_project.definitions`) loads it:
# runs created with this origin are runs of a job the UI knows, and it can re-execute them.
LOCATION = "dagster_project.definitions"
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
ASSET_JOB = "__ASSET_JOB"  # the implicit asset job: what the UI's "Materialize" launches


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
    run every check of what it selects: one run of the code location's asset job, created as
    the UI creates it (so the UI lists it, links its job and can re-execute it) and executed in
    this process, tagged with what launched it (`benchlake/launched_by`) and the selection.
    With `progress`, the steps are told on stderr (the `benchlake_progress` logger) instead of
    Dagster's console log. `checks=False` (tests of the tables themselves) builds what is
    selected without running a check, but those an asset runs as it writes."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.execution.api import execute_run

    from dagster_project.warehouse.catalog import ensure_published

    defs = _definitions_for(settings)
    keys = selected_keys(defs, select)
    config = {**IN_PROCESS, **(run_config or {})}
    if progress:
        config["loggers"] = {"benchlake_progress": {}}
    instance = instance or dg.DagsterInstance.ephemeral()
    # Without checks: none but those an asset computes as it writes (they are not separable).
    inseparable = {check for key in keys for check in
                   defs.resolve_asset_graph().get(key).assets_def.check_keys
                   if not defs.resolve_asset_graph().get(key).assets_def.can_subset}
    run = _create_run(instance, keys, None if checks else inseparable, config, {
        "benchlake/launched_by": launched_by, "benchlake/select": select or "(all)"})
    job = InMemoryJob(defs.resolve_implicit_global_asset_job_def())
    result = execute_run(job, run, instance, raise_on_error=raise_on_error)
    ensure_published(settings.home)  # the catalog is rebuilt even by a run without views
    return Outcome(instance, result.run_id, result.success)


def _definitions_for(settings: Settings) -> dg.Definitions:
    """The code location's definitions with these settings as the resources (the code location
    reads the same ones from the environment when it loads; tests pass their own, and the
    judge's are read now)."""
    from dagster_project.defs.resources import BenchlakeSettings, judge_resource

    loaded = definitions()
    return dg.Definitions(
        assets=loaded.assets, asset_checks=loaded.asset_checks, jobs=loaded.jobs,
        sensors=loaded.sensors, schedules=loaded.schedules, loggers=loaded.loggers,
        resources={**(loaded.resources or {}),
                   "benchlake": BenchlakeSettings.from_settings(settings),
                   "judge": judge_resource()})


def run_job(settings: Settings, job_name: str, *, instance: dg.DagsterInstance,
            run_config: dict | None = None, launched_by: str = "python",
            progress: bool = False) -> Outcome:
    """One run of job `job_name` of the code location (as the UI launches it: it lists the run
    and can re-execute it), executed in this process; `run_config` as the job's launchpad
    takes it (e.g. op config)."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.execution.api import execute_run

    defs = _definitions_for(settings)
    config = {**IN_PROCESS, **(run_config or {})}
    if progress:
        config["loggers"] = {"benchlake_progress": {}}
    run = _create_run(instance, None, None, config, {"benchlake/launched_by": launched_by},
                      job_name)
    result = execute_run(InMemoryJob(defs.resolve_job_def(job_name)), run, instance,
                         raise_on_error=False)
    return Outcome(instance, result.run_id, result.success)


def _create_run(instance: dg.DagsterInstance, keys: list[dg.AssetKey] | None,
                check_keys: set[dg.AssetCheckKey] | None, run_config: dict,
                tags: dict[str, str], job_name: str = ASSET_JOB) -> Any:
    """A run of the code location's job `job_name` (default: the asset job, for `keys` and
    `check_keys`, None: every check of them; None keys: the whole job), recorded with the job's
    origin and snapshots, as the UI's launch records it."""
    import sys

    from dagster._core.definitions.selector import JobSubsetSelector
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    from dagster_project.settings import PROJECT_ROOT

    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(executable_path=sys.executable, module_name=LOCATION,
                             working_directory=str(PROJECT_ROOT)), location_name=LOCATION)
    with origin.create_location(instance) as location:
        [repo] = location.get_repositories().values()
        remote_job = location.get_job(JobSubsetSelector(
            location_name=LOCATION, repository_name=repo.name, job_name=job_name,
            op_selection=None, asset_selection=keys, asset_check_selection=check_keys))
        plan = location.get_execution_plan(remote_job, run_config, step_keys_to_execute=None,
                                           known_state=None, instance=instance)
        return instance.create_run(
            job_name=job_name, run_id=None, run_config=run_config, status=None,
            tags={**remote_job.tags, **tags}, root_run_id=None, parent_run_id=None,
            step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute,
            execution_plan_snapshot=plan.execution_plan_snapshot,
            job_snapshot=remote_job.job_snapshot,
            parent_job_snapshot=remote_job.parent_job_snapshot,
            asset_selection=None if keys is None else frozenset(keys),
            asset_check_selection=None if check_keys is None else frozenset(check_keys),
            resolved_op_selection=None, op_selection=None,
            remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(), asset_graph=repo.asset_graph)


class Outcome:
    """The run one `materialize` call made, read back from the instance's event log."""

    def __init__(self, instance: dg.DagsterInstance, run_id: str, success: bool) -> None:
        self.instance = instance
        self.run_id = run_id
        self.success = success

    @functools.cached_property
    def all_events(self) -> list:
        """The run's Dagster events, read once (a run of ~1,000 events takes ~0.1 s to read)."""
        return [e.dagster_event for e in self.instance.all_logs(self.run_id)
                if e.is_dagster_event]

    def _of(self, kind: str) -> list:
        return [e for e in self.all_events if e.event_type_value == kind]

    def get_asset_materialization_events(self) -> list:
        return self._of("ASSET_MATERIALIZATION")

    def metadata_of(self, key: str) -> dict[str, Any]:
        """The metadata (plain values) of asset `key`'s materialization in this run."""
        [found] = [m.metadata for e in self.get_asset_materialization_events()
                   if (m := e.event_specific_data.materialization).asset_key.to_user_string()
                   == key]
        return {k: v.value for k, v in found.items()}

    def get_asset_check_evaluations(self) -> list:
        return [e.event_specific_data for e in self._of("ASSET_CHECK_EVALUATION")]

    def failed_checks(self) -> list[str]:
        """`asset:check` of every check that failed with ERROR severity (WARN ones are notes)."""
        return [f"{c.asset_key.to_user_string()}:{c.check_name}"
                for c in self.get_asset_check_evaluations()
                if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR]

    def failures(self) -> list[Failed]:
        """What failed, per step: the assets it writes, the first line of the underlying error
        and the input file it concerned when known (a `dg.Failure` with `input_file` metadata,
        or an OSError's file name)."""
        planned: dict[str, set[str]] = {}
        for event in self._of("ASSET_MATERIALIZATION_PLANNED"):
            planned.setdefault(event.step_key or "", set()).add(
                event.event_specific_data.asset_key.to_user_string())
        out = []
        for event in self._of("STEP_FAILURE"):
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
            step = event.step_key or "?"
            out.append(Failed(step, sorted(planned.get(step, ())) or [step], message,
                              input_file))
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
