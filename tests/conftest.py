"""Shared fixtures: the demo inputs and one demo warehouse for the whole session (both xdist
workers share them: the first to ask builds, under a lock), and copies of the demo to break on
purpose."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchlake_demo import ensure_demo
from dagster_project.settings import Settings
from dagster_project.warehouse.project import locked, prepare_manifest

warnings.filterwarnings("ignore", module="dagster")

# The Rynn-VP ingestion assets (no candidates/evidence) and the views over them: what the
# ingest tests need.
RVP_INGEST = " or ".join([*(f"key:raw_{k}" for k in (
    "rvp_snapshot", "rvp_checksums", "rvp_media", "rvp_cases", "rvp_intervals", "rvp_rejects")),
    *(f"1+key:{v}" for v in ("rvp_cases", "rvp_intervals", "rvp_media", "rvp_rejects")),
    "key:stg_rvp_snapshot", "key:stg_rvp_checksums", "1+key:rvp_dataset_stats"])

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def pytest_configure(config: pytest.Config) -> None:
    # The definitions are built from the dbt manifest: parse sql/ once if it changed (a lock
    # keeps the two workers from parsing at once).
    prepare_manifest()


def settings_for(home: Path, **overrides: str) -> Settings:
    env = {"BENCHLAKE_HOME": str(home)}
    env.update({Settings.env_name(k): v for k, v in overrides.items()})
    return Settings.from_env(env)


def _shared(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every xdist worker of this session sees (beside the workers' own temp roots)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return root / name


@pytest.fixture(scope="session")
def demo_inputs(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Demo inputs built once per session; tests copy from here instead of regenerating videos."""
    home = _shared(tmp_path_factory, "demo-inputs")
    with locked(home.parent / "demo-inputs.lock"):
        settings = settings_for(home)
        ensure_demo(settings)
    return settings


@pytest.fixture(scope="session")
def demo_warehouse(demo_inputs: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A warehouse with every asset but the exports materialized from the demo and every check
    run, by `benchlake materialize`'s own path, once per session (read-only for tests)."""
    from dagster_project.runner import materialize

    home = _shared(tmp_path_factory, "demo-warehouse")
    with locked(home.parent / "demo-warehouse.lock"):
        settings = settings_for(home)
        if not (home / ".built").exists():
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(demo_inputs.demo_dir, home / "demo")
            result = materialize(settings)
            assert result.success, [f.message for f in result.failures()]
            # what ran, for tests/cli/test_cli.py (the run's instance is ephemeral)
            (home / ".checks.json").write_text(json.dumps(_checks_of(result)))
            (home / ".built").touch()
    return settings


def _checks_of(outcome: Any) -> dict[str, list[str]]:
    """The checks a run planned and those it evaluated (`asset:check`), and its skipped steps."""
    out: dict[str, set[str]] = {"planned": set(), "evaluated": set(), "skipped_steps": set()}
    for record in outcome.instance.all_logs(outcome.run_id):
        event = record.dagster_event
        kind = event.event_type_value if event else None
        if kind in ("ASSET_CHECK_EVALUATION_PLANNED", "ASSET_CHECK_EVALUATION"):
            data = event.event_specific_data
            out["planned" if kind.endswith("PLANNED") else "evaluated"].add(
                f"{data.asset_key.to_user_string()}:{data.check_name}")
        elif kind == "STEP_SKIPPED":
            out["skipped_steps"].add(event.step_key or "")
    return {k: sorted(v) for k, v in out.items()}


def dbt_views(sql_dir: Path, home: Path | str, workdir: Path) -> Any:
    """The views and seeds of the dbt project at `sql_dir` (a copy with other rules, say) built
    by dbt over the tables of `home` into `workdir/benchlake.duckdb`, no test run; a read-only
    connection to them."""
    import duckdb

    from dagster_project.warehouse.project import dbt_env, dbt_executable

    database = workdir / "benchlake.duckdb"
    env = {**os.environ, **dbt_env(home, database)}
    done = subprocess.run(
        [dbt_executable(), "build", "--select", "resource_type:seed resource_type:model",
         "--indirect-selection", "empty", "--project-dir", str(sql_dir), "--profiles-dir",
         str(sql_dir), "--target-path", str(workdir / "target"), "--log-path",
         str(workdir / "logs"), "--quiet"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    con = duckdb.connect(str(database), read_only=True)
    con.execute("USE benchlake")
    return con


def table_identities(home: Path, names: tuple[str, ...]) -> dict[str, list[tuple]]:
    """(file, inode, mtime) of each raw table's file or parts: what tells a table written again
    from one left as it was."""
    from dagster_project.tables import table_files

    return {name: [(f.name, os.stat(f).st_ino, os.stat(f).st_mtime_ns)
                   for f in table_files(home, name)] for name in names}


def compiled_in_list(home: Path, model: str, column: str) -> list[str] | None:
    """The values the last dbt build of `model` (its path under `models/`, without `.sql`)
    named in `<column> IN (...)` of its compiled SQL, sorted; None when it named none (a build
    from scratch reads everything). `column` is a regular expression."""
    path = home / "dbt" / "target" / "compiled" / "benchlake" / "models" / f"{model}.sql"
    found = re.findall(rf"{column} IN \(([^)]*)\)", path.read_text())
    return sorted({v.strip().strip("'") for text in found for v in text.split(",")
                   if v.strip() != "NULL"}) if found else None


def copy_home(settings: Settings, dest: Path, **overrides: str) -> Settings:
    """A private, writable copy of a warehouse (without its Dagster history)."""
    shutil.copytree(settings.home, dest, ignore=shutil.ignore_patterns("dagster", ".built", ".checks.json"))
    return settings_for(dest, **overrides)


@pytest.fixture
def rynn_vp_copy(demo_inputs: Settings, tmp_path: Path) -> Path:
    """A private, writable copy of the demo Rynn-VP snapshot."""
    dest = tmp_path / "Rynn-VP"
    shutil.copytree(Path(demo_inputs.rynn_vp_source_or_demo()), dest)
    return dest


# --- a Ray cluster for the tests that need one (tests/test_cluster.py, the s3 home) ------------

RAY = str(Path(sys.executable).parent / "ray")
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # single node, 127.0.0.1 only


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """A one-node Ray cluster of 2 CPUs for this module: `ray start --head --block` in its own
    session, so that ending that session ends every process of the cluster (and only those:
    `ray stop` would stop any other cluster of the machine too)."""
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # socket paths must stay short
    port = _free_port()
    saved = {k: os.environ.get(k) for k in LOOPBACK}
    os.environ.update(LOOPBACK)  # before Ray is imported here: it reads it then
    import ray

    log = Path(temp) / "head.log"
    with log.open("wb") as out:
        head = subprocess.Popen(
            [RAY, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
            env={**os.environ, **LOOPBACK}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while b"Ray runtime started" not in log.read_bytes():
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray could not start (fails, never skips):\n"
                            f"{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)  # what the head's own stop left behind
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
