"""Statistics on degenerate input are NULL, never NaN or ±Infinity, end to end: one valid judgment
of a new judge run (one case: one pair to correlate) materializes, every check passes and no view
holds a non-finite number; `benchlake sql --format json`, the exports and the UI previews print
none either. And a dbt node that fails is named by the CLI with the first line of dbt's message.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_project.reports.export import _read_view
from dagster_project.reports.markdown import _render_csv
from dagster_project.runner import materialize
from dagster_project.settings import Settings
from dagster_project.warehouse.catalog import connect, view_names
from dagster_project.warehouse.previews import markdown_preview
from tests.conftest import copy_home

BENCHLAKE = str(Path(sys.executable).parent / "benchlake")
NEW_RUN = "judge-run-solo"


def _strict_json(text: str):
    """JSON as the standard has it: a bare NaN or Infinity is an error, not a float."""
    def refuse(token: str):
        raise ValueError(f"not JSON: {token}")
    return json.loads(text, parse_constant=refuse)


def _non_finite(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """{view.column: rows} of every DOUBLE/FLOAT column of every relation holding NaN or ±Inf
    (lists of doubles too)."""
    found = {}
    for view in view_names(con):
        for name, kind, *_ in con.execute(f'DESCRIBE "{view}"').fetchall():
            if kind in ("DOUBLE", "FLOAT"):
                test = f'NOT isfinite("{name}")'
            elif kind in ("DOUBLE[]", "FLOAT[]"):
                test = f'list_bool_or(list_transform("{name}", x -> NOT isfinite(x)))'
            else:
                continue
            n = con.execute(f'SELECT count(*) FROM "{view}" WHERE {test}').fetchall()[0][0]
            if n:
                found[f"{view}.{name}"] = n
    return found


@pytest.fixture(scope="module")
def solo_judge_home(demo_warehouse: Settings, tmp_path_factory: pytest.TempPathFactory):
    """A copy of the demo warehouse whose judgments folder holds one more file: one valid final
    judgment of a judge run not seen before, for one case, materialized with every check."""
    root = tmp_path_factory.mktemp("solo-judge")
    drop = root / "judgments"
    shutil.copytree(demo_warehouse.judgments_root(), drop)
    settings = copy_home(demo_warehouse, root / "home", judgments_dir=str(drop))
    con = connect(demo_warehouse.home)
    [(line,)] = con.execute("SELECT min(line) FROM rvp_judgments WHERE is_final AND "
                            "source_file = 'judge-run-a.jsonl'").fetchall()
    record = json.loads((drop / "judge-run-a.jsonl").read_text().splitlines()[line - 1])
    (drop / f"{NEW_RUN}.jsonl").write_text(json.dumps({**record, "judge_run_id": NEW_RUN}) + "\n")
    outcome = materialize(settings, "key:judgments_dir+", raise_on_error=False)
    return settings, outcome


def test_one_judgment_of_a_new_run_materializes_with_every_check_passing(solo_judge_home):
    settings, outcome = solo_judge_home
    assert outcome.success, [f.message for f in outcome.failures()]
    assert outcome.failed_checks() == []
    con = connect(settings.home)
    rows = con.execute("SELECT metric, n_common, correlation, kendall_tau FROM rvp_judge_agreement "
                       "WHERE judge_run_id = ? ORDER BY ALL", [NEW_RUN]).fetchall()
    assert rows, "the new run is compared with the demo's runs"
    # one evaluation in common: nothing to correlate, no pair of systems to rank
    assert {(n, corr, tau) for _, n, corr, tau in rows} == {(1, None, None)}
    # its leaderboard: one score (or none) per system, so no error bar
    board = con.execute("SELECT n_scored, final_score, final_score_se, final_score_ci_low, "
                        "final_score_ci_high FROM rvp_leaderboard WHERE judge_run_id = ?",
                        [NEW_RUN]).fetchall()
    assert sorted(n for n, *_ in board)[-1] == 1
    assert all((score is None) == (n == 0) and se is None and low is None and high is None
               for n, score, se, low, high in board)


def test_no_view_holds_nan_or_infinity(solo_judge_home):
    settings, _ = solo_judge_home
    con = connect(settings.home)
    assert "rvp_judge_agreement" in view_names(con)
    assert _non_finite(con) == {}


def test_sql_json_prints_null_for_nan_and_infinity(demo_warehouse):
    env = {**os.environ, "BENCHLAKE_HOME": str(demo_warehouse.home)}
    query = ("SELECT 'nan'::DOUBLE AS x, 'inf'::DOUBLE AS y, -'inf'::DOUBLE AS z, 1.5 AS w, "
             "['nan'::DOUBLE, 2.0] AS l, {'a': 'inf'::DOUBLE} AS s")
    done = subprocess.run([BENCHLAKE, "sql", query, "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _strict_json(done.stdout) == [{"x": None, "y": None, "z": None, "w": 1.5,
                                          "l": [None, 2.0], "s": {"a": None}}]
    as_csv = subprocess.run([BENCHLAKE, "sql", query, "--format", "csv"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert as_csv.returncode == 0 and "nan" not in as_csv.stdout.lower()
    assert "inf" not in as_csv.stdout.lower()


def test_exports_and_previews_show_no_nan_or_infinity(tmp_path):
    con = duckdb.connect(":memory:")
    con.execute("CREATE VIEW degenerate AS SELECT * FROM (VALUES (1, 'nan'::DOUBLE), "
                "(2, 'inf'::DOUBLE), (3, -'inf'::DOUBLE), (4, 0.25)) AS t(k, x)")
    table, rows = _read_view(con, "degenerate", [])
    assert table.column("x").to_pylist() == [None, None, None, 0.25]  # Parquet too
    assert [r["x"] for r in rows] == [None, None, None, 0.25]
    assert _render_csv(["k", "x"], rows) == "k,x\n1,\n2,\n3,\n4,0.25\n"
    preview = markdown_preview(pa.table({"x": [math.nan, math.inf, -math.inf, 0.5]}))
    assert "nan" not in preview.lower() and "inf" not in preview.lower()
    assert preview.splitlines()[2:] == ["|  |", "|  |", "|  |", "| 0.5 |"]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BENCHLAKE_HOME": str(home)}
    return subprocess.run([BENCHLAKE, *args], env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_a_failed_dbt_test_and_model_are_named_with_dbts_message(demo_warehouse, tmp_path):
    settings = copy_home(demo_warehouse, tmp_path / "home")
    # the first segment's part of the judgments (the demo's files are one segment)
    [judgments] = (settings.home / "tables" / "raw" / "rvp_judgments").glob("00000.*.parquet")
    table = pq.read_table(judgments)
    runs = table.column("judge_run_id").to_pylist()
    runs[0] = None  # one judgment without its run: stg_rvp_judgments' not_null_columns fails
    column = table.schema.get_field_index("judge_run_id")
    pq.write_table(table.set_column(column, "judge_run_id", pa.array(runs, pa.string())),
                   judgments)
    done = _cli(settings.home, "materialize", "--select", "key:stg_rvp_judgments", "-v")
    assert done.returncode == 1
    said = ("dbt test failed: not_null_columns_stg_rvp_judgments_system__case_id__judge_run_id"
            "__attempt__is_final: Got 1 result, configured to fail if != 0")
    assert f"failed: {said}" in done.stderr, done.stderr  # the CLI's line
    assert "The dbt CLI process" not in done.stderr and "blocking asset check" not in done.stderr
    # the run's log it names holds dbt's own lines, the failing test's among them, and `-v`
    # streamed them too
    log = Path(done.stderr.rsplit("dbt's log: ", 1)[1].split()[0])
    assert log.parent == settings.home / "logs"
    for text in (log.read_text(encoding="utf-8"), done.stdout):
        assert "Running with dbt=" in text and "Done. PASS=" in text, text
        assert any("FAIL 1" in line and "not_null_columns_stg_rvp_judgments" in line
                   for line in text.splitlines()), text

    # a table that is no Parquet: the view cannot be built (its definition is built again
    # when the home's dbt workspace is gone)
    judgments.write_bytes(b"not a parquet file\n" * 4)
    shutil.rmtree(settings.home / "dbt")
    done = _cli(settings.home, "materialize", "--select", "key:stg_rvp_judgments")
    assert done.returncode == 1
    [line] = [ln for ln in done.stderr.splitlines() if "dbt model failed" in ln
              and ln.startswith("benchlake: ")]
    assert "failed: dbt model failed: stg_rvp_judgments: " in line, done.stderr
    assert str(judgments) in line  # DuckDB's own message names the file
