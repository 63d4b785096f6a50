"""The dbt project in `sql/` and the manifest Dagster reads it from.

`DBT_PROJECT` is the project (dagster-dbt's `DbtProject`); its manifest, `sql/target/
manifest.json` (git-ignored), is what the Dagster definitions of the views and their checks are
built from. It is prepared (`dbt parse`) by `prepare_manifest()` when any file under `sql/`
changed since the last parse (a digest of the files and the dbt version is kept beside it): the
CLI and the test session call it before loading the definitions, `dagster dev` when it loads
them. Nothing is parsed when the definitions are merely imported elsewhere: a stale manifest is
then an error that says what to run.

Every `dbt build` runs against one home's own working copy of the warehouse
(`warehouse/catalog.py`); parsing needs no home, so it runs with placeholders. A build runs in
this process (`build`, dbt's programmatic `dbtRunner`): dbt is already imported here by
dagster-dbt, so a build costs what dbt does, not a second interpreter importing dbt and
reading the project again (about 2.5 s per build on 2 cores). It starts from the project as dbt
parsed it for that workspace, kept beside its artifacts (`_parsed`), not from a parse of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.metadata
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster_dbt import DbtProject

from dagster_project import lifeline
from dagster_project.settings import SQL_DIR

DBT_PROJECT = DbtProject(project_dir=SQL_DIR, profiles_dir=SQL_DIR)
_GENERATED = {"target", "logs", "dbt_packages"}
_STAMP = ".benchlake-digest"


def dbt_executable() -> str:
    """The dbt of this environment (beside the interpreter: `.venv/bin/dbt`), else PATH's."""
    local = Path(sys.executable).parent / "dbt"
    if local.exists():
        return str(local)
    found = shutil.which("dbt")
    if not found:
        raise RuntimeError("dbt is not installed in this environment (run ./dev)")
    return found


def dbt_command() -> list[str]:
    """`dbt_executable()` run so that it dies with the process that starts it (`lifeline`:
    a `kill -9` of benchlake leaves no dbt behind); `dbt_env` names that process."""
    return lifeline.command(dbt_executable())


def dbt_env(home: Path | str, database: Path) -> dict[str, str]:
    """What a dbt command over `home` needs besides this process's environment
    (`sql/profiles.yml` and the sources read both; `dbt_command` its parent)."""
    return {"BENCHLAKE_HOME": str(home), "BENCHLAKE_DBT_DATABASE": str(database),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", **lifeline.env()}


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` set in this process's environment for the block (dbt reads its profile's
    `env_var()`s and its own settings from there)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# The events of a build the Dagster events are made of (dagster-dbt reads the same ones from a
# dbt subprocess's JSON log), and the error events that say why a build stopped early.
_RESULT_EVENTS = frozenset({"LogSeedResult", "LogModelResult", "LogSnapshotResult",
                            "LogTestResult"})
_ONE_AT_A_TIME = threading.Lock()  # dbt's programmatic runner keeps global state


@dataclass
class Build:
    """What one in-process dbt command did: its result events as dbt's JSON log writes them,
    `run_results.json`'s results, and why dbt stopped before running its nodes (else None)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def build(args: Sequence[str], *, home: Path | str, database: Path, target: Path) -> Build:
    """`dbt <args>` over `home`'s working database, in this process, its artifacts in `target`
    and its log in `target`'s sibling `logs/` (nothing on stdout)."""
    from dbt.cli.main import dbtRunner
    from dbt_common.events.functions import msg_to_dict

    done = Build()
    errors: list[str] = []

    def collect(msg: Any) -> None:
        name = msg.info.name
        if name in _RESULT_EVENTS:
            done.events.append(msg_to_dict(msg))
        elif msg.info.level == "error":
            errors.append(msg.info.msg)

    target = Path(target)
    results = target / "run_results.json"
    results.unlink(missing_ok=True)  # never the results of an earlier command
    with (_ONE_AT_A_TIME, environment(dbt_env(home, database)), _json_schemas(target),
          _compiled_templates(target), _shortcuts()):
        try:
            outcome = dbtRunner(manifest=_parsed(target, home, database), callbacks=[collect]
                                ).invoke([*args, *_flags(target)])
        finally:
            _close_duckdb()
    if getattr(outcome.result, "results", None) is not None:
        done.results = _results(outcome.result, results)
    if outcome.exception is not None or (not done.results and not outcome.success):
        done.error = (str(outcome.exception) if outcome.exception is not None
                      else (errors[0] if errors else "dbt stopped with no result"))
    return done


def _flags(target: Path) -> list[str]:
    """The options of every in-process dbt command over the workspace whose `target` it is.
    --no-write-json: dbt would write manifest.json (megabytes, twice) and graph.gpickle on every
    command, ~1 s that nothing reads (the definitions read the manifest `sql/target` holds); a
    build's results are taken from its return value and written once (`_results`).
    dbt's lines go to its log file, and to stdout only when `DBT_LOG_LEVEL` (dbt's own setting)
    asks: the CLI sets it for the block it redirects into the run's log (`cli._dbt_output`)."""
    return ["--project-dir", str(DBT_PROJECT.project_dir), "--profiles-dir",
            str(DBT_PROJECT.profiles_dir), "--target-path", str(target), "--log-path",
            str(target.parent / "logs"), "--log-level", os.environ.get("DBT_LOG_LEVEL", "none"),
            "--log-level-file", "info",
            "--no-use-colors", "--no-send-anonymous-usage-stats", "--no-write-json"]


_SCHEMAS = "json-schemas-{key}.json"
_TEMPLATES = "jinja-code-{key}.marshal"


def _versions_key(*dists: str) -> str:
    """A key of Python's version and those of the distributions `dists`."""
    return hashlib.sha256("\0".join(
        [sys.version] + [importlib.metadata.version(d) for d in dists]).encode()).hexdigest()[:24]


def _keep(target: Path, pattern: str, path: Path, data: bytes) -> None:
    """`data` as `path` (of `pattern`'s files in `target`), the files of other keys removed:
    written whole or not at all (another process may read it at the same time)."""
    for old in target.glob(pattern.format(key="*")):
        if old != path:
            old.unlink(missing_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@contextlib.contextmanager
def _json_schemas(target: Path) -> Iterator[None]:
    """dbt's JSON schemas of its project, profile and config classes, kept in the workspace's
    `target` once built. dbt validates its project and profile against them at the start of
    every command, and builds them anew in each process (mashumaro generating code for ~800
    dataclasses: ~0.3 s of every `benchlake materialize` that runs dbt). A schema is a function of
    the classes, so it is keyed by the versions of the packages that define and build them."""
    from dbt_common.dataclass_schema import dbtClassMixin

    path = target / _SCHEMAS.format(key=_versions_key(
        "dbt-core", "dbt-common", "dbt-adapters", "dbt-duckdb", "mashumaro"))
    try:
        known: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    original = dbtClassMixin.__dict__["json_schema"]
    built: dict[str, Any] = {}

    def json_schema(cls: type) -> Any:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name not in known:
            known[name] = built[name] = original.__func__(cls)
        return known[name]

    dbtClassMixin.json_schema = classmethod(json_schema)
    try:
        yield
    finally:
        dbtClassMixin.json_schema = original
        if built:
            _keep(target, _SCHEMAS, path, json.dumps(known, sort_keys=True).encode())


# A project's templates are a few thousand at most: a file over this many holds sources no
# longer read (an edited project), and keeps only those of the build that wrote it.
_MAX_TEMPLATES = 20_000


@contextlib.contextmanager
def _compiled_templates(target: Path) -> Iterator[None]:
    """The Python code Jinja compiles dbt's templates to (each node's SQL and every macro it
    calls), kept in the workspace's `target` (`marshal`, as Jinja's own bytecode cache keeps
    it). dbt compiles every template it renders anew in each process: ~390 for a build of 85
    nodes, ~0.45 s of one core. The code is a function of the template's source and of the
    environment that compiles it (dbt's two kinds, their extensions), so it is looked up by
    those, for one version of Python, Jinja and dbt."""
    import marshal

    import jinja2
    from dbt_common.clients import jinja as dbt_jinja
    from jinja2.utils import internalcode

    kinds = (dbt_jinja.MacroFuzzEnvironment, dbt_jinja.NativeSandboxEnvironment)
    path = target / _TEMPLATES.format(key=_versions_key("jinja2", "dbt-common", "dbt-core"))
    try:
        known = marshal.loads(path.read_bytes())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError, EOFError, TypeError):
        known = {}
    used: dict[str, Any] = {}
    added = 0

    @internalcode
    def compile(self: Any, source: Any, name: str | None = None, filename: str | None = None,
                raw: bool = False, defer_init: bool = False) -> Any:
        nonlocal added
        if raw or not isinstance(source, str) or dbt_jinja.MACRO_DEBUGGING:
            return original(self, source, name, filename, raw, defer_init)
        key = hashlib.sha256("\0".join([type(self).__qualname__, *sorted(self.extensions),
                                        repr((name, filename, defer_init)), source]
                                       ).encode()).hexdigest()
        code = known.get(key)
        if code is None:
            code = known[key] = original(self, source, name, filename, raw, defer_init)
            added += 1
        used[key] = code
        return code

    original = jinja2.Environment.compile
    if any(kind.compile is not original for kind in kinds):  # a dbt of its own: not kept
        yield
        return
    for kind in kinds:
        kind.compile = compile
    try:
        yield
    finally:
        for kind in kinds:
            del kind.compile  # Jinja's again
        if added:
            _keep(target, _TEMPLATES, path,
                  marshal.dumps(known if len(known) <= _MAX_TEMPLATES else used))


@contextlib.contextmanager
def _shortcuts() -> Iterator[None]:
    """Four costs of every dbt command that give nothing to an in-process build, replaced for
    the block by code that gives dbt's own result (`tests/warehouse/test_project.py` compares
    each with dbt's), ~0.7 s of a build of 85 nodes on 2 cores:
    - the `fqn:` selection method (what a bare name or dotted path selects) answers from an
      index of the names (`_indexed_fqn_method`): dbt compares every node of the project with
      each name given, twice (a build naming 85 nodes: 240,000 comparisons, ~0.5 s);
    - the module that declared a behavior flag (named in dbt's warning if the flag is off) is
      found by walking the frames, where dbt's `inspect.stack()` reads the source lines of every
      frame of the stack, for each flag (~0.15 s);
    - the graph summary dbt writes for diagnostics (`graph_summary.json`) reads each node's
      type, where dbt serializes every node, twice, to read it (~0.1 s);
    - an event below the level of every logger is not made into a message nobody writes
      (`_logged_events_only`)."""
    from dbt.compilation import Linker
    from dbt.graph.selector_methods import MethodManager, MethodName
    from dbt_common.behavior_flags import BehaviorFlagRendered
    from dbt_common.events.event_manager import EventManager

    methods = MethodManager.SELECTOR_METHODS
    saved = (methods[MethodName.FQN], BehaviorFlagRendered.__dict__["_default_source"],
             Linker.get_graph_summary, EventManager.fire_event)
    methods[MethodName.FQN] = _indexed_fqn_method(saved[0])
    BehaviorFlagRendered._default_source = staticmethod(_flag_source)
    Linker.get_graph_summary = _graph_summary
    EventManager.fire_event = _logged_events_only(saved[3])
    try:
        yield
    finally:
        (methods[MethodName.FQN], BehaviorFlagRendered._default_source,
         Linker.get_graph_summary, EventManager.fire_event) = saved


def _logged_events_only(fire: Any) -> Any:
    """`EventManager.fire_event` for events no logger writes: a debug (or test) event below
    the level of every logger is not made into a message at all. dbt makes a protobuf message
    of every event and a formatted line for each logger, then drops the line below the logger's
    level: a build of 85 nodes fires ~1,750 debug events that way (~0.6 s of its threads), and
    its log file is at info. Info and above always fire (the build's results are read from info
    events, its errors from error ones)."""
    from dbt_common.events.base_types import EventLevel

    rank = {EventLevel.DEBUG: 0, EventLevel.TEST: 1, EventLevel.INFO: 2, EventLevel.WARN: 3,
            EventLevel.ERROR: 4}

    def fire_event(self: Any, e: Any, level: Any = None, node: Any = None,
                   force_warn_or_error_handling: bool = False) -> None:
        below = min([rank[EventLevel.INFO], *(rank[lg.level] for lg in self.loggers)])
        if rank.get(level or e.level_tag(), below) >= below or force_warn_or_error_handling:
            fire(self, e, level, node, force_warn_or_error_handling)

    return fire_event


def _flag_source() -> str:
    """`BehaviorFlagRendered._default_source`: the first module up the stack but dbt's
    `behavior_flags` (the caller that declared the flag)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if name and name != "dbt_common.behavior_flags":
            return name
        frame = frame.f_back
    return "Unknown"


def _graph_summary(self: Any, manifest: Any) -> dict[int, dict[str, Any]]:
    """`Linker.get_graph_summary`: per node of the graph (numbered in its order) its name, its
    type and the numbers of its successors."""
    index = {name: i for i, name in enumerate(self.graph)}
    summary: dict[int, dict[str, Any]] = {}
    for name, i in index.items():
        kind = manifest.expect(name).resource_type
        summary[i] = {"name": name, "type": getattr(kind, "value", kind)}
        successors = [index[n] for n in self.graph.successors(name)]
        if successors:
            summary[i]["succ"] = successors
    return summary


_WILDCARDS = frozenset("*?[]")


def _indexed_fqn_method(base: type) -> type:
    """A subclass of dbt's `QualifiedNameSelectorMethod` (`base`) whose search looks a name up
    in an index of every node's leaf name and dotted fqn prefixes (with and without the
    package), built once for the command's manifest (dbt makes a method per name given).
    Without a wildcard, dbt matches a name exactly there; versioned nodes (other rules) and
    wildcard names are always left to dbt's comparison."""
    built: list[Any] = []  # (manifest, names, versioned, nodes) of the last manifest indexed

    class Indexed(base):  # type: ignore[misc, valid-type]
        def _index(self) -> tuple[dict[str, list[int]], list[int], list[tuple[Any, Any]]]:
            if not built or built[0] is not self.manifest:
                nodes = list(self.non_source_nodes(_Everything()))
                names: dict[str, list[int]] = {}
                versioned = []
                for i, (_, node) in enumerate(nodes):
                    if node.is_versioned:
                        versioned.append(i)
                        continue
                    keys = {node.fqn[-1]}
                    for fqn in (node.fqn, node.fqn[1:]):
                        flat = [part for segment in fqn for part in segment.split(".")]
                        keys.update(".".join(flat[:k]) for k in range(1, len(flat) + 1))
                    for key in keys:
                        names.setdefault(key, []).append(i)
                built[:] = [self.manifest, names, versioned, nodes]
            return built[1], built[2], built[3]

        def search(self, included_nodes: Any, selector: str) -> Iterator[Any]:
            if not selector or _WILDCARDS & set(selector):
                yield from super().search(included_nodes, selector)
                return
            names, versioned, nodes = self._index()
            for i in sorted({*names.get(selector, ()), *versioned}):
                unique_id, node = nodes[i]
                if unique_id in included_nodes and self.node_is_match(
                        selector, node.fqn, node.is_versioned):
                    yield unique_id

    return Indexed


class _Everything:
    """A set that holds every node (to list them all with dbt's own iterators)."""

    def __contains__(self, item: object) -> bool:
        return True


_PARSED = "parsed-{key}.pickle"


def _parsed(target: Path, home: Path | str, database: Path) -> Any:
    """The project as dbt parsed it for this workspace (dbt's `Manifest`), so that a build
    starts from it instead of parsing: even a partial parse reads and checks its whole saved
    state and every project file, ~0.8 s on 2 cores, on every command. It is parsed once (`dbt
    parse`) and kept pickled in the workspace's `target` (local, never mirrored to an object
    store), under a key of everything a parse depends on: the project's files and where they
    are, the versions of dbt, its adapter and Python, the workspace, and the values of the
    environment variables the project reads. A key that differs parses again. None if dbt could
    not parse (the build then parses, and says why)."""
    from dbt.cli.main import dbtRunner
    from dbt.contracts.graph.manifest import Manifest

    env = dbt_env(home, database)
    digest = hashlib.sha256("\0".join(
        [project_digest(), str(DBT_PROJECT.project_dir), sys.version, str(target)]
        + [importlib.metadata.version(d) for d in ("dbt-core", "dbt-duckdb", "dbt-adapters")]
        + [f"{k}={env[k]}" for k in ("BENCHLAKE_HOME", "BENCHLAKE_DBT_DATABASE")]
    ).encode()).hexdigest()[:24]
    path = target / _PARSED.format(key=digest)
    if path.is_file():
        with contextlib.suppress(Exception):  # a file another dbt wrote: parse again
            return Manifest(**pickle.loads(path.read_bytes()))
    with environment(env):
        parsed = dbtRunner().invoke(["parse", *_flags(target)])
    if not parsed.success or parsed.result is None:
        return None
    # Its data fields only, by name: dbt's own `Manifest.__reduce_ex__` passes them by position
    # in an order that no longer matches the class (its lookups land in the wrong fields); the
    # lookups, lock and caches are rebuilt when first used.
    fields = {f.name: getattr(parsed.result, f.name) for f in dataclasses.fields(Manifest)
              if not f.name.startswith("_")}
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob(_PARSED.format(key="*")):
        old.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(tmp, path)
    return parsed.result


def _results(executed: Any, path: Path) -> list[dict[str, Any]]:
    """A command's node results as `run_results.json` holds them, written there too (for a
    person reading the workspace, and `bench/scale.py`'s profile)."""
    from dbt.artifacts.schemas.run import RunResultsArtifact

    artifact = RunResultsArtifact.from_execution_results(
        results=executed.results, elapsed_time=executed.elapsed_time,
        generated_at=executed.generated_at, args=executed.args)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    artifact.write(str(tmp))
    os.replace(tmp, path)
    return artifact.to_dict(omit_none=False)["results"]


def _close_duckdb() -> None:
    """Close the DuckDB database dbt-duckdb keeps open for the process (a class attribute it
    reuses between commands), so the working database is free for the catalog's publishing and
    for the next process, and its memory is given back."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        env, DuckDBConnectionManager._ENV = DuckDBConnectionManager._ENV, None
    if env is not None:
        with contextlib.suppress(Exception):
            env.close()


def project_digest(sql_dir: Path = SQL_DIR) -> str:
    """What the manifest depends on: every project file and the dbt version."""
    digest = hashlib.sha256(importlib.metadata.version("dbt-core").encode())
    for path in sorted(sql_dir.rglob("*")):
        rel = path.relative_to(sql_dir)
        if path.is_file() and rel.parts[0] not in _GENERATED and not rel.name.startswith("."):
            digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing) for the block, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def manifest_is_current(sql_dir: Path = SQL_DIR) -> bool:
    target = sql_dir / "target"
    stamp = target / _STAMP
    return ((target / "manifest.json").exists() and stamp.exists()
            and stamp.read_text() == project_digest(sql_dir))


def prepare_manifest(sql_dir: Path = SQL_DIR) -> Path:
    """`<sql_dir>/target/manifest.json`, parsed now if the project changed since. Safe from
    several processes at once (a file lock; the others wait and reuse it)."""
    target = sql_dir / "target"
    if manifest_is_current(sql_dir):
        return target / "manifest.json"
    with locked(target / ".parse.lock"):
        if manifest_is_current(sql_dir):
            return target / "manifest.json"
        with tempfile.TemporaryDirectory(prefix="benchlake-parse-") as tmp:
            env = {**os.environ, **dbt_env("/__BENCHLAKE_HOME__", Path(tmp) / "benchlake.duckdb")}
            done = subprocess.run(
                [*dbt_command(), "parse", "--project-dir", str(sql_dir), "--profiles-dir",
                 str(sql_dir), "--target-path", str(target), "--log-path",
                 str(Path(tmp) / "logs"), "--quiet", "--no-partial-parse"],
                env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            raise RuntimeError(f"dbt could not parse {sql_dir}:\n" + "\n".join(tail))
        (target / _STAMP).write_text(project_digest(sql_dir))
    return target / "manifest.json"


def current_manifest() -> Path:
    """The manifest the definitions are built from: prepared here under `dagster dev` (as
    dagster-dbt's `prepare_if_dev` does), otherwise it must be current already."""
    if os.environ.get("DAGSTER_IS_DEV_CLI"):
        return prepare_manifest()
    if not manifest_is_current():
        raise RuntimeError(
            f"the dbt manifest in {SQL_DIR / 'target'} is missing or older than sql/: any "
            "`benchlake` command prepares it (or `python -m dagster_project.warehouse.project`)")
    return DBT_PROJECT.manifest_path


if __name__ == "__main__":
    print(prepare_manifest())
