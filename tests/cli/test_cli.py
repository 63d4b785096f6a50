"""The `benchlake` command line, run as a real subprocess against real warehouses."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagster_project.cli import query
from dagster_project.settings import SQL_DIR

BENCHLAKE = str(Path(sys.executable).parent / "benchlake")


def run(home: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "BENCHLAKE_HOME": str(home)}
    return subprocess.run([BENCHLAKE, *args], env=env, capture_output=True, text=True,
                          timeout=300, **kw)


def test_sql_formats(demo_warehouse):
    q = "SELECT case_id, n_intervals FROM rvp_cases ORDER BY case_id"
    as_json = json.loads(run(demo_warehouse.home, "sql", q, "--format", "json").stdout)
    assert isinstance(as_json, list) and len(as_json) >= 12
    assert set(as_json[0]) == {"case_id", "n_intervals"}
    rows = list(csv.DictReader(io.StringIO(run(demo_warehouse.home, "sql", q, "--format",
                                               "csv").stdout)))
    assert [r["case_id"] for r in rows] == [r["case_id"] for r in as_json]
    table = run(demo_warehouse.home, "sql", q)
    assert table.returncode == 0 and as_json[0]["case_id"][:20] in table.stdout


def test_a_query_starts_without_the_table_writers(demo_warehouse):
    """`benchlake sql` loads DuckDB and the catalog only: Polars, PyArrow, Dagster and dbt
    (what writing tables and running assets need) would add ~0.3 s and more to every query's
    start, which a first query of a mart pays in full."""
    code = ("import sys\n"
            "from dagster_project.cli import main\n"
            "sys.argv = ['benchlake', 'sql', 'SELECT count(*) FROM rvp_cases', '--format', 'csv']\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(sorted(m for m in ('polars', 'pyarrow', 'dagster', 'dbt') if m in sys.modules),"
            " file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "BENCHLAKE_HOME": str(demo_warehouse.home)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "count_star()" and int(done.stdout.splitlines()[1]) > 0
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_sql_error_is_one_line_and_nonzero(demo_warehouse):
    done = run(demo_warehouse.home, "sql", "SELECT nope FROM rvp_cases")
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "nope" in done.stderr


def test_empty_arguments_are_one_line_errors_not_defaults(tmp_path):
    """`--select "$SEL"` with SEL unset must not materialize everything; an empty query is
    named as such (not a Python error)."""
    for args, says in ((("materialize", "--select", ""), "--select is empty"),
                       (("sql", "  "), "the query is empty")):
        done = run(tmp_path / "home", *args)
        assert done.returncode == 1 and says in done.stderr
        assert done.stderr.strip().count("\n") == 0
    assert not (tmp_path / "home" / "tables").exists()  # nothing ran


def test_empty_warehouse_is_a_clear_error(tmp_path):
    done = run(tmp_path / "empty", "sql", "SELECT 1")
    assert done.returncode != 0
    assert "no catalog yet" in done.stderr and "benchlake materialize" in done.stderr
    assert done.stderr.strip().count("\n") == 0


@pytest.mark.slow
def test_sql_answers_while_a_materialization_runs(demo_warehouse, tmp_path):
    home = tmp_path / "busy"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    env = {**os.environ, "BENCHLAKE_HOME": str(home)}
    # A copied home: its views still read the first home's tables, so it says so until any
    # materialization here rebuilt them.
    assert "was built for" in run(home, "sql", "SELECT 1").stderr
    assert run(home, "materialize", "--select", "key:raw_rvp_snapshot").returncode == 0
    # a view rebuilt and tested by dbt, while queries are answered from the catalog
    proc = subprocess.Popen([BENCHLAKE, "materialize", "--select", "key:rvp_media"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    answers = 0
    from tests.conftest import settings_for

    settings = settings_for(home)
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        cols, rows = query(settings, "SELECT count(*) FROM rvp_intervals")
        assert rows[0][0] > 0
        answers += 1
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    assert answers >= 3  # queries kept being answered during the run
    assert query(settings, "SELECT count(*) FROM rvp_intervals")[1][0][0] > 0


@pytest.mark.slow
def test_materialize_with_selection_rebuilds_catalog(demo_warehouse, tmp_path):
    home = tmp_path / "sel"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    (home / "benchlake.duckdb").unlink()
    done = run(home, "materialize", "--select", "key:raw_rvp_snapshot")
    assert done.returncode == 0, done.stderr
    assert (home / "benchlake.duckdb").exists()  # published again, every view rebuilt here
    assert run(home, "sql", "SELECT count(*) FROM rvp_cases").returncode == 0
    assert (home / "dagster" / "dagster.yaml").exists()  # a persistent Dagster home
    bad = run(home, "materialize", "--select", "key:nonexistent_asset_xyz")
    assert bad.returncode != 0


def test_a_full_materialize_runs_every_check_and_skips_none(demo_warehouse):
    """The session's demo warehouse is `benchlake materialize`'s default selection with its
    checks: every check of every selected asset was planned and evaluated (none skipped, none
    left out), and no step was skipped."""
    from dagster_project.runner import definitions, selected_keys

    ran = json.loads((demo_warehouse.home / ".checks.json").read_text())
    defs = definitions()
    keys = set(selected_keys(defs, None))
    expected = {f"{k.asset_key.to_user_string()}:{k.name}"
                for k in defs.resolve_asset_graph().asset_check_keys if k.asset_key in keys}
    # every dbt data test is a check of the default selection, beside the Python checks
    manifest = json.loads((SQL_DIR / "target" / "manifest.json").read_text())
    tests = {n["name"] for n in manifest["nodes"].values() if n["resource_type"] == "test"}
    assert len(tests) > 200 and tests < {key.split(":", 1)[1] for key in expected}
    assert set(ran["planned"]) == expected
    assert set(ran["evaluated"]) == expected
    assert ran["skipped_steps"] == []
