"""`benchlake ui`: the real webserver and daemon (`dagster dev`), driven through GraphQL and
headless Chromium.

One server for the module: launch the demo materialization (the Rynn-VP ingestion plus the
catalog) through GraphQL, check what the UI shows of it, render the asset graph, then stop the
server with SIGTERM and read the run back from the Dagster home. The screenshot goes to
`artifacts/ui/asset_graph.png`."""

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
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dagster_project.settings import Settings
from tests.conftest import ARTIFACTS
from tests.oracles.wheels import in_ci

BENCHLAKE = str(Path(sys.executable).parent / "benchlake")
READY_TIMEOUT = 90.0  # seconds for the webserver and its code location to come up
RUN_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0
# "The demo materialization": the Rynn-VP ingestion assets (raw tables) and the dbt models
# behind the dataset statistics (views built and tested by dbt in the same run).
RAW_ASSETS = ["rvp_snapshot", "rvp_checksums", "rvp_media", "rvp_cases", "rvp_intervals"]
VIEW_ASSETS = ["stg_rvp_cases", "stg_rvp_intervals", "stg_rvp_media", "rvp_cases",
               "rvp_intervals", "rvp_media", "rvp_interval_overlaps", "rvp_endpoint_excesses",
               "rvp_whitespace_tasks", "rvp_dataset_stats"]
DEMO_ASSETS = [[f"raw_{k}"] for k in RAW_ASSETS] + [[k] for k in VIEW_ASSETS]
GRAPH_NAMES = ["rvp_leaderboard", "rvp_candidate_scores"]
SCREENSHOT = ARTIFACTS / "ui" / "asset_graph.png"
WINDOW = (1600, 2100)  # tall: the lineage view zooms to fit the graph's width

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=body,
                                     headers={"Content-Type": "application/json"})
    with _NO_PROXY.open(request, timeout=60) as response:
        answer = json.load(response)
    assert not answer.get("errors"), f"GraphQL errors: {answer['errors']}"
    return answer["data"]


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, pgid, state) of a live process, None if gone (zombies count as gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields_ = text[text.rindex(")") + 2:].split()
    return (int(fields_[1]), int(fields_[2]), fields_[0]) if fields_[0] != "Z" else None


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))):
            children.setdefault(st[0], []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _ours(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"dagster" in cmdline or b"benchlake" in cmdline


def kill_tree(pid: int, known: set[int]) -> None:
    """SIGKILL the process groups of `pid` and of its (known) descendants that are still
    dagster/benchlake processes (a recycled pid is left alone), never the test's own group."""
    groups = {st[1] for p in {pid, *known, *descendants(pid)} if _ours(p) and (st := _stat(p))}
    for pgid in groups - {os.getpgrp()}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


@dataclass
class UiServer:
    port: int
    home: Path
    proc: subprocess.Popen
    log: Path
    repository: dict[str, str] = field(default_factory=dict)  # the GraphQL repository selector
    run_ids: list[str] = field(default_factory=list)
    seen_pids: set[int] = field(default_factory=set)

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def ui_env(home: Path, quiet_dirs: Path) -> dict[str, str]:
    """The server's environment: demo sources (a developer's .env must not leak in), and
    empty drop folders so the sensors skip instead of launching runs beside the test's."""
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update({name: "" for name in Settings.env_names()})
    for name in ("responses", "judgments"):
        (quiet_dirs / name).mkdir(parents=True, exist_ok=True)
    env.update(BENCHLAKE_HOME=str(home), RESPONSES_DIR=str(quiet_dirs / "responses"),
               JUDGMENTS_DIR=str(quiet_dirs / "judgments"))
    return env


def wait_ready(server: UiServer) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        assert server.proc.poll() is None, (
            f"benchlake ui exited with {server.proc.returncode}:\n{server.log_tail()}")
        try:
            with _NO_PROXY.open(f"http://127.0.0.1:{server.port}/server_info", timeout=5):
                pass
            repos = graphql(server.port, """{ repositoriesOrError {
                ... on RepositoryConnection { nodes { name location { name } jobs { name } } } } }
            """)["repositoriesOrError"].get("nodes") or []
            for repo in repos:
                if "__ASSET_JOB" in {j["name"] for j in repo["jobs"]}:
                    server.repository = {"repositoryLocationName": repo["location"]["name"],
                                         "repositoryName": repo["name"]}
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    pytest.fail(f"the UI did not come up within {READY_TIMEOUT:.0f}s:\n{server.log_tail()}")


def stop(server: UiServer) -> int | None:
    """SIGTERM, as a service manager would; the exit status, or None if it had to be killed."""
    if server.proc.poll() is None:
        server.seen_pids |= descendants(server.proc.pid)
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_tree(server.proc.pid, server.seen_pids)
            server.proc.wait(timeout=10)
            return None
    return server.proc.returncode


@pytest.fixture(scope="module")
def ui_server(demo_warehouse: Settings,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiServer]:
    base = tmp_path_factory.mktemp("ui")
    home = base / "home"
    src = demo_warehouse.home
    shutil.copytree(src, home, ignore=lambda d, names: ["dagster"] if Path(d) == src else [])
    log = base / "ui.log"
    port = free_port()
    with log.open("wb") as sink:
        proc = subprocess.Popen([BENCHLAKE, "ui", "--port", str(port)], cwd=base,
                                env=ui_env(home, base / "drop"), stdin=subprocess.DEVNULL,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    server = UiServer(port=port, home=home, proc=proc, log=log)
    try:
        wait_ready(server)
        server.seen_pids |= descendants(proc.pid)
        yield server
    finally:
        stop(server)  # kills the tree if SIGTERM does not end it in time


LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
  }
}"""

RUN_STATUS = """query Run($id: ID!) { runOrError(runId: $id) { __typename
    ... on Run { status } ... on PythonError { message } } }"""

RUN_LOGS = """
query Logs($id: ID!) {
  logsForRun(runId: $id) {
    ... on EventConnection { events { __typename
      ... on MessageEvent { message stepKey }
      ... on ExecutionStepFailureEvent { error { message } }
      ... on RunFailureEvent { error { message } } } }
  }
}"""


def run_log_tail(port: int, run_id: str, n: int = 15) -> str:
    events = graphql(port, RUN_LOGS, {"id": run_id})["logsForRun"].get("events") or []
    lines = []
    for e in events[-n:]:
        error = (e.get("error") or {}).get("message", "")
        lines.append(f"{e['__typename']} {e.get('stepKey') or ''}: {e.get('message')} {error}")
    return "\n".join(lines)


@pytest.mark.slow
def test_ui_launches_the_demo_materialization(ui_server: UiServer) -> None:
    # before the webserver, `benchlake ui` says where the newest HTML report is: none yet here
    assert "no results browser yet: `benchlake export` writes one" in ui_server.log_tail(400)
    port = ui_server.port
    params = {
        "selector": {**ui_server.repository, "pipelineName": "__ASSET_JOB",
                     "assetSelection": [{"path": key} for key in DEMO_ASSETS]},
        "mode": "default",
        # One process for the steps: on 2 cores a process per step would only add start-up
        # time (the multiprocess executor has its own test in tests/rynn_vp/test_evidence.py).
        "runConfigData": {"execution": {"config": {"in_process": {}}}},
        "executionMetadata": {"tags": [{"key": "benchlake/test", "value": "test_ui"}]},
    }
    launched = graphql(port, LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    ui_server.run_ids.append(run_id)

    # DefaultRunCoordinator: the run starts at once, it never waits in a queue.
    statuses = [launched["run"]["status"]]
    deadline = time.monotonic() + RUN_TIMEOUT
    while statuses[-1] not in ("SUCCESS", "FAILURE", "CANCELED"):
        if time.monotonic() > deadline:
            pytest.fail(f"run {run_id} still {statuses[-1]} after {RUN_TIMEOUT:.0f}s:\n"
                        f"{run_log_tail(port, run_id)}")
        time.sleep(1)
        statuses.append(graphql(port, RUN_STATUS, {"id": run_id})["runOrError"]["status"])
    assert statuses[-1] == "SUCCESS", (f"run {run_id} ended {statuses[-1]}:\n"
                                       f"{run_log_tail(port, run_id)}")
    assert "QUEUED" not in statuses, statuses

    materialization = """query M($path: [String!]!) { assetOrError(assetKey: {path: $path}) {
        ... on Asset { assetMaterializations(limit: 1) { runId metadataEntries { __typename label
          ... on IntMetadataEntry { intValue } ... on PathMetadataEntry { path }
          ... on MarkdownMetadataEntry { mdStr } } } } } }"""
    [event] = graphql(port, materialization, {"path": ["raw_rvp_cases"]}
                      )["assetOrError"]["assetMaterializations"]
    assert event["runId"] == run_id
    entries = {e["label"]: e for e in event["metadataEntries"]}
    assert entries["dagster/row_count"]["intValue"] > 0
    path = Path(entries["path"]["path"])
    assert entries["path"]["__typename"] == "PathMetadataEntry"
    assert path.is_file() and path.is_relative_to(ui_server.home), path
    preview = entries["preview"]
    assert preview["__typename"] == "MarkdownMetadataEntry"
    assert preview["mdStr"].startswith("| case_id |") and "|---|" in preview["mdStr"]
    # a mart users read: built by dbt in the same run, with its row count and first rows
    [event] = graphql(port, materialization, {"path": ["rvp_dataset_stats"]}
                      )["assetOrError"]["assetMaterializations"]
    assert event["runId"] == run_id
    entries = {e["label"]: e for e in event["metadataEntries"]}
    assert entries["dagster/row_count"]["intValue"] > 30
    assert entries["preview"]["mdStr"].startswith("| property | value |")
    # its dbt data tests ran as asset checks
    dbt_checks = graphql(port, """{ assetNodes(assetKeys: [{path: ["rvp_dataset_stats"]}]) {
        assetChecksOrError { ... on AssetChecks { checks { name
          executionForLatestMaterialization { runId status } } } } } }""")["assetNodes"]
    ran = [c for c in dbt_checks[0]["assetChecksOrError"]["checks"]
           if (c["executionForLatestMaterialization"] or {}).get("runId") == run_id]
    assert ran and all(c["executionForLatestMaterialization"]["status"] == "SUCCEEDED"
                       for c in ran), dbt_checks

    checks = graphql(port, """{ assetCheckExecutions(assetKey: {path: ["raw_rvp_checksums"]},
        checkName: "rvp_checksums_verified", limit: 1) {
          runId status evaluation { success severity } } }""")["assetCheckExecutions"]
    assert checks and checks[0]["runId"] == run_id, checks
    assert checks[0]["evaluation"] is not None and checks[0]["status"] != "IN_PROGRESS"


REEXECUTE = """mutation R($parent: String!) { launchPipelineReexecution(reexecutionParams: {
    parentRunId: $parent, strategy: ALL_STEPS }) { __typename
    ... on LaunchRunSuccess { run { runId status } } ... on PythonError { message } } }"""


def wait_for_run(port: int, run_id: str) -> str:
    status, deadline = "", time.monotonic() + RUN_TIMEOUT
    while status not in ("SUCCESS", "FAILURE", "CANCELED"):
        assert time.monotonic() < deadline, f"run {run_id} still {status}"
        time.sleep(1)
        status = graphql(port, RUN_STATUS, {"id": run_id})["runOrError"]["status"]
    return status


@pytest.mark.slow
def test_a_cli_run_is_a_run_of_a_job_the_ui_knows_and_re_executes(
        ui_server: UiServer, tmp_path: Path) -> None:
    """`benchlake materialize` beside the UI: the run is listed, its job resolves in the code
    location, and the UI's "Re-execute" (launchPipelineReexecution) runs it again."""
    env = ui_env(ui_server.home, tmp_path)
    done = subprocess.run([BENCHLAKE, "materialize", "--select", "key:rvp_prompts"], env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"run ([0-9a-f-]{36})", done.stderr).group(1)
    run = graphql(ui_server.port, """query Q($id: ID!) { runOrError(runId: $id) { ... on Run {
        pipelineName status tags { key value }
        repositoryOrigin { repositoryLocationName repositoryName } } } }""",
                  {"id": run_id})["runOrError"]
    assert run["status"] == "SUCCESS" and run["pipelineName"] == "__ASSET_JOB"
    assert run["repositoryOrigin"] == {
        "repositoryLocationName": ui_server.repository["repositoryLocationName"],
        "repositoryName": ui_server.repository["repositoryName"]}
    assert {"key": "benchlake/launched_by", "value": "benchlake cli"} in run["tags"]
    again = graphql(ui_server.port, REEXECUTE, {"parent": run_id})["launchPipelineReexecution"]
    assert again["__typename"] == "LaunchRunSuccess", again
    ui_server.run_ids.append(again["run"]["runId"])
    assert wait_for_run(ui_server.port, again["run"]["runId"]) == "SUCCESS"


@pytest.mark.slow
def test_ui_daemon_runs_the_sensors_and_the_schedule(ui_server: UiServer) -> None:
    port, repo = ui_server.port, ui_server.repository
    sensor_query = """query S($s: SensorSelector!) { sensorOrError(sensorSelector: $s) {
        ... on Sensor { sensorState { status ticks(limit: 1) { status skipReason } } } } }"""
    selector = {**repo, "sensorName": "vv_responses_sensor"}
    deadline = time.monotonic() + 90
    while True:
        state = graphql(port, sensor_query, {"s": selector})["sensorOrError"]["sensorState"]
        # a tick still being evaluated (STARTED) has no outcome yet: wait for it
        done = state["ticks"] and state["ticks"][0]["status"] != "STARTED"
        if done or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert state["status"] == "RUNNING"
    # The test points RESPONSES_DIR at an empty folder: the daemon evaluated it and skipped.
    assert state["ticks"], f"the sensor daemon never ticked:\n{ui_server.log_tail()}"
    assert state["ticks"][0]["status"] == "SKIPPED", state["ticks"]

    schedule = graphql(port, """query Q($s: ScheduleSelector!) { scheduleOrError(
        scheduleSelector: $s) { ... on Schedule { scheduleState { status } } } }""",
                       {"s": {**repo, "scheduleName": "rescoring_daily"}})["scheduleOrError"]
    assert schedule["scheduleState"]["status"] == "RUNNING"
    instance = graphql(port, """{ instance { runQueuingSupported
        daemonHealth { allDaemonStatuses { daemonType healthy } } } }""")["instance"]
    assert instance["runQueuingSupported"] is False  # no queue: launched runs start at once
    health = {d["daemonType"]: d["healthy"] for d in instance["daemonHealth"]["allDaemonStatuses"]}
    assert health.get("SENSOR") and health.get("SCHEDULER"), health


def chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    return None


def render(url: str, screenshot: Path, budget_ms: int, profile: Path) -> str:
    """The DOM of `url` after `budget_ms` of virtual time, with a screenshot of the window."""
    cmd = [chromium() or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--disable-background-networking", "--disable-quic",
           "--no-first-run", "--disable-component-update", "--disable-sync",
           "--no-proxy-server", "--hide-scrollbars", f"--user-data-dir={profile}",
           f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--virtual-time-budget={budget_ms}",
           f"--screenshot={screenshot}", "--dump-dom", url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_ui_renders_the_asset_graph(ui_server: UiServer, tmp_path: Path) -> None:
    from PIL import Image

    if chromium() is None:  # .ci/run installs it: in CI its absence is a failure
        (pytest.fail if in_ci() else pytest.skip)("chromium is not installed")

    # The lineage of the Rynn-VP leaderboard: the mart users look for first, with the dbt
    # models and raw tables upstream of it (the whole graph is too big for one screenshot).
    url = (f"http://127.0.0.1:{ui_server.port}/assets/rvp_leaderboard?"
           + urllib.parse.urlencode({"view": "lineage", "lineageScope": "upstream",
                                     "lineageDepth": "2"}))
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    missing: list[str] = GRAPH_NAMES
    for attempt, budget in enumerate((20_000, 45_000)):  # a slow machine gets more time
        dom = render(url, SCREENSHOT, budget, tmp_path / f"profile{attempt}")
        missing = [n for n in GRAPH_NAMES if f">{n}<" not in dom]
        if not missing:
            break
    assert not missing, f"asset names not rendered: {missing} (screenshot: {SCREENSHOT})"
    with Image.open(SCREENSHOT) as image:
        assert image.size == WINDOW
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert SCREENSHOT.stat().st_size > 50_000 and len(colors) > 200, "a blank screenshot"


@pytest.mark.slow
def test_ui_stops_cleanly_and_keeps_history(ui_server: UiServer) -> None:
    import dagster as dg

    assert ui_server.run_ids, "no run was launched (see test_ui_launches_the_demo_...)"
    code = stop(ui_server)  # None: it did not stop within STOP_TIMEOUT and was killed
    assert code == 0, f"exit status {code} after SIGTERM:\n{ui_server.log_tail()}"
    left = [p for p in ui_server.seen_pids if _stat(p)]
    assert not left, f"processes left after the UI stopped: {left}"

    # The history is on disk under $BENCHLAKE_HOME/dagster: a restarted UI shows it.
    home = ui_server.home / "dagster"
    assert (home / "dagster.yaml").read_text().count("DefaultRunCoordinator") == 1
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run_id in ui_server.run_ids:
            run = instance.get_run_by_id(run_id)
            assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        assert instance.get_latest_materialization_event(dg.AssetKey(["raw_rvp_cases"]))
        assert instance.get_latest_materialization_event(dg.AssetKey("rvp_dataset_stats"))


def test_ui_port_taken_is_one_line_and_nonzero(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "BENCHLAKE_HOME": str(tmp_path / "home")}
        done = subprocess.run([BENCHLAKE, "ui", "--port", str(port)], env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(port) in lines[0] and "in use" in lines[0], done.stderr
    assert not (tmp_path / "home" / "dagster").exists()  # refused before touching anything
