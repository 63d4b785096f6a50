"""A materialization that did not finish is visible: `benchlake_status` and the CLI's warning
(a real `benchlake materialize` killed with SIGKILL half-way through the evidence).
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


def test_complete_warehouse_reports_every_table_complete(demo_warehouse):
    _, rows = query(demo_warehouse, "SELECT table_name, status, written_run_id, rows "
                                    "FROM benchlake_status ORDER BY 1")
    by_table = {r[0]: r[1:] for r in rows}
    # every raw table a Python asset writes, and the catalog dbt builds
    assert {"rvp_evidence_frames", "vv_frames", "rvp_rejects", "vv_rejects", "catalog",
            "vv_scored_responses"} <= by_table.keys()
    assert all(status == "complete" for status, _, _ in by_table.values())
    n_frames = query(demo_warehouse, "SELECT count(*) FROM rvp_evidence_frames")[1][0][0]
    assert by_table["rvp_evidence_frames"][2] == n_frames
    # the run recorded is the Dagster run that wrote the table: one run wrote them all
    assert len({run for _, run, _ in by_table.values()}) == 1
    assert all(len(run) == 36 for _, run, _ in by_table.values())


@pytest.mark.slow
def test_killed_run_leaves_a_visible_partial_table(demo_warehouse, tmp_path):
    home = tmp_path / "killed"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    env = {**os.environ, "BENCHLAKE_HOME": str(home)}
    # a copied home: any materialization first rebuilds its views here
    assert run(home, "materialize", "--select", "key:rvp_prompts").returncode == 0
    for _attempt in range(5):  # the window is a few seconds; retry if the run outpaced us
        # evidence extracted again: its step then runs long enough to be killed inside
        shutil.rmtree(home / "evidence", ignore_errors=True)
        for table in ("rvp_evidence_frames", "rvp_storyboards", "rvp_evaluations"):
            shutil.rmtree(home / "tables" / "raw" / table, ignore_errors=True)
        before = _markers(home, "rvp_evidence_frames")[0]["written_run_id"]
        proc = subprocess.Popen([BENCHLAKE, "materialize", "--select",
                                 "key:raw_rvp_evidence_frames"], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        killed = False
        while proc.poll() is None:
            marks = _markers(home, "rvp_evidence_frames")
            if marks and marks[0]["started_run_id"] != marks[0].get("written_run_id"):
                time.sleep(0.3)  # a few cases written, the rest not
                os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its worker processes
                killed = True
                break
            time.sleep(0.005)
        proc.wait()
        if killed:
            break
    else:
        pytest.fail("the evidence run finished before it could be killed, five times")
    settings = settings_for(home)
    _, rows = query(settings, "SELECT status, written_run_id, last_started_run_id "
                              "FROM benchlake_status WHERE table_name = 'rvp_evidence_frames'")
    [(status, written, started)] = rows
    assert status == "incomplete" and written == before and started != before
    # the CLI still answers, and says what it serves is partial
    done = run(home, "sql", "SELECT count(*) FROM rvp_evidence_frames")  # via stg_ to the table
    assert done.returncode == 0
    assert "warning: rvp_evidence_frames is incomplete" in done.stderr
    assert started in done.stderr and "benchlake_status" in done.stderr
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
