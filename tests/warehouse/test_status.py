"""A materialization that did not finish is visible: `benchlake_status` and the CLI's warning
(a real `benchlake materialize` killed with SIGKILL half-way through the evidence partitions).
Also: tables in a pipe use the content's width, not 80 columns."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from dagster_project.cli import query
from dagster_project.status import STATUS_DIR
from tests.cli.test_cli import BENCHLAKE, run
from tests.conftest import settings_for


def _markers(home: Path, table: str) -> list[dict]:
    out = []
    for f in (home / STATUS_DIR / table).glob("*.json"):
        with contextlib.suppress(OSError, ValueError):  # being renamed into place right now
            out.append(json.loads(f.read_text()))
    return out


def test_complete_warehouse_reports_every_partition_complete(demo_warehouse):
    _, rows = query(demo_warehouse, """
        SELECT table_name, count(*) AS n, count(*) FILTER (WHERE status = 'complete') AS ok,
               count(DISTINCT written_run_id) AS runs
        FROM benchlake_status GROUP BY 1 ORDER BY 1""")
    by_table = {r[0]: r[1:] for r in rows}
    n_cases = query(demo_warehouse, "SELECT count(*) FROM rvp_cases")[1][0][0]
    assert by_table["rvp_evidence_frames"][:2] == (n_cases, n_cases)
    assert by_table["vv_frames"][:2] == (3, 3)  # one partition per data_source
    assert all(n == ok for n, ok, _ in by_table.values())
    # the run recorded is the Dagster run that wrote the table
    run_ids = query(demo_warehouse, "SELECT DISTINCT written_run_id FROM benchlake_status")[1]
    assert run_ids and all(len(r[0]) == 36 for r in run_ids)


@pytest.mark.slow
def test_killed_run_leaves_a_visible_partial_table(demo_warehouse, tmp_path):
    home = tmp_path / "killed"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    env = {**os.environ, "BENCHLAKE_HOME": str(home)}
    n_cases = len(_markers(home, "rvp_evidence_frames"))
    for _attempt in range(5):  # the window is a few seconds; retry if the run outpaced us
        proc = subprocess.Popen([BENCHLAKE, "materialize", "--select",
                                 "key:raw_rvp_evidence_frames"], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        killed = False
        while proc.poll() is None:
            marks = _markers(home, "rvp_evidence_frames")
            runs = {m["started_run_id"] for m in marks}
            pending = [m for m in marks if m.get("written_run_id") != m["started_run_id"]]
            if len(runs) == 1 and 0 < len(pending) < n_cases and len(marks) == n_cases:
                os.killpg(proc.pid, signal.SIGKILL)  # the runner and its worker processes
                killed = True
                break
            time.sleep(0.005)
        proc.wait()
        if killed:
            break
    else:
        pytest.fail("the evidence run finished before it could be killed, five times")
    settings = settings_for(home)
    _, rows = query(settings, """
        SELECT status, count(*), count(DISTINCT last_started_run_id) FROM benchlake_status
        WHERE table_name = 'rvp_evidence_frames' GROUP BY 1 ORDER BY 1""")
    status = {r[0]: r[1:] for r in rows}
    assert status["incomplete"][0] >= 1 and status["incomplete"][1] == 1
    assert status.get("complete", (0,))[0] + status["incomplete"][0] == n_cases
    # the CLI still answers, and says what it serves is partial
    done = run(home, "sql", "SELECT count(*) FROM rvp_evidence_frames")  # via stg_ to the table
    assert done.returncode == 0
    assert "warning: rvp_evidence_frames is incomplete" in done.stderr
    assert f"of {n_cases} partition(s)" in done.stderr and "benchlake_status" in done.stderr
    # a query that does not read the evidence is not warned about
    quiet = run(home, "sql", "SELECT count(*) FROM vv_scores")
    assert quiet.returncode == 0 and "incomplete" not in quiet.stderr
    # finishing the work clears it
    assert run(home, "materialize", "--select", "key:raw_rvp_evidence_frames").returncode == 0
    assert "incomplete" not in run(home, "sql", "SELECT count(*) FROM rvp_evidence_frames").stderr


def test_tables_in_a_pipe_use_the_content_width(demo_warehouse):
    long = "x" * 150
    done = run(demo_warehouse.home, "sql",
               f"SELECT '{long}' AS a_rather_long_column_name, 12345 AS b")
    assert done.returncode == 0
    assert long in done.stdout  # one unbroken cell, not 5-character pieces over 30 lines
    assert max(len(line) for line in done.stdout.splitlines()) > 150
    assert len(done.stdout.splitlines()) <= 6
