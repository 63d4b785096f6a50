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
parsed it for that workspace, kept beside its artifacts (`_parsed`), not from a parse of its own,
and without dbt's per-command costs that give an in-process build nothing (`dbt_shortcuts`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.metadata
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
from dagster_project.warehouse import dbt_shortcuts

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
    with (_ONE_AT_A_TIME, environment(dbt_env(home, database)),
          dbt_shortcuts.in_process(target)):
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
    dbt_shortcuts.keep_one(target, _PARSED, path,
                           pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL))
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
