"""What a dbt node is made of (`warehouse/fingerprints.py`): a table's digest, and the early
cutoff it allows (a table rebuilt from changed raw tables that holds the same rows leaves
everything that reads it as it was)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dagster_project.runner import materialize
from dagster_project.settings import SQL_DIR
from dagster_project.tables import table_path
from dagster_project.warehouse.catalog import connect
from dagster_project.warehouse.fingerprints import table_digest
from tests.conftest import copy_home, dbt_views


def _digest(rows: str, columns: str = "a INTEGER, b VARCHAR") -> str:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({columns})")
    if rows:
        con.execute(f"INSERT INTO t VALUES {rows}")
    return table_digest(con, "t")


def test_a_digest_is_of_the_rows_in_any_order_and_of_the_columns() -> None:
    base = _digest("(1, 'x'), (2, 'y'), (2, 'y')")
    assert _digest("(2, 'y'), (1, 'x'), (2, 'y')") == base  # the order of the rows
    assert _digest("(1, 'x'), (2, 'y')") != base  # a row held once less
    assert _digest("(1, 'x'), (2, 'y'), (2, 'z')") != base  # one value
    assert _digest("(1, 'x'), (2, 'y'), (2, NULL)") != base
    assert _digest("(1, 'x'), (2, 'y'), (2, 'y')", "a BIGINT, b VARCHAR") != base  # a type
    assert _digest("(1, 'x'), (2, 'y'), (2, 'y')", "a INTEGER, c VARCHAR") != base  # a name
    assert _digest("") != _digest("", "a BIGINT, b VARCHAR")
    con = duckdb.connect()  # a query in parentheses digests as the table it would fill
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'x'), (2, 'y'), (2, 'y')) v(a, b)")
    assert table_digest(con, "(SELECT a, b FROM t ORDER BY a DESC)") == table_digest(con, "t")


def _rebuilt(run, key: str) -> bool:
    return run.metadata_of(key).get("rebuilt", True) is not False


def _reused(run) -> dict[str, set[bool]]:
    by_asset: dict[str, set[bool]] = {}
    for e in run.get_asset_check_evaluations():
        by_asset.setdefault(e.asset_key.path[-1], set()).add("reused" in e.metadata)
    return by_asset


def _rows(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple]:
    """A table's rows in order, its doubles to 9 significant digits (an aggregate's last bits
    follow the order DuckDB's threads summed in)."""
    rows = con.execute(f'SELECT * FROM "{name}" ORDER BY ALL').fetchall()
    return [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row) for row in rows]


# the tables the selection builds: the scores, what reads them, and what they read
TABLES = ("stg_rvp_judgments", "rvp_candidate_scores", "rvp_leaderboard", "rvp_by_scene",
          "rvp_by_source_group", "rvp_system_pairs", "rvp_judge_agreement",
          "rvp_profile_diff_systems")


@pytest.mark.slow
def test_a_table_holding_the_same_rows_cuts_off_what_reads_it(demo_warehouse, tmp_path: Path):
    settings = copy_home(demo_warehouse, tmp_path / "home")
    select = "key:rvp_candidate_scores+"
    assert materialize(settings, select).success  # another home: its views are built here
    raw = table_path(settings.home, "rvp_candidates")
    candidates = pq.read_table(raw)
    # The same rows in other bytes: the raw table's version changes, the scores do not.
    pq.write_table(candidates, raw, compression="zstd", row_group_size=1)
    same = materialize(settings, select)
    assert same.success
    assert "same_rows" in same.metadata_of("rvp_candidate_scores")
    assert not _rebuilt(same, "rvp_candidate_scores")
    for key in ("rvp_leaderboard", "rvp_by_scene", "rvp_judge_agreement"):
        assert not _rebuilt(same, key) and "same_rows" not in same.metadata_of(key)
    checks = _reused(same)
    assert checks["rvp_leaderboard"] == checks["rvp_candidate_scores"] == {True}
    assert checks["stg_rvp_candidates"] == {False}  # a view of the raw table: tested again
    # A candidate gone: its scores change, and so does everything that reads them.
    pq.write_table(candidates.filter(pc.not_equal(candidates["case_id"],
                                                  candidates["case_id"][0])), raw)
    changed = materialize(settings, select)
    assert changed.success
    for key in ("rvp_candidate_scores", "rvp_leaderboard", "rvp_by_scene"):
        assert _rebuilt(changed, key) and "same_rows" not in changed.metadata_of(key)
    assert _reused(changed)["rvp_leaderboard"] == {False}
    # Every table holds what a build from scratch over the same raw tables gives.
    full = dbt_views(SQL_DIR, settings.home, tmp_path / "full")
    con = connect(settings.home)
    try:
        for name in TABLES:
            assert _rows(con, name) == _rows(full, name), name
        gone = candidates["case_id"][0].as_py()
        assert {s for (s,) in con.execute("SELECT DISTINCT status FROM rvp_candidate_scores "
                                          "WHERE case_id = ?", [gone]).fetchall()} == {
            "missing_candidate"}
    finally:
        con.close()
        full.close()
