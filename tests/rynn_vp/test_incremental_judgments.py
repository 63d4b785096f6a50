"""stg_rvp_judgments kept part by part (`sql/macros/raw_parts.sql`): after judgment files are
added and removed, the table holds what deciding `is_final` over every raw row gives, row for
row, and the build read only the parts it did not hold yet."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from dagster_project.runner import materialize
from dagster_project.rynn_vp import judgment_replay
from dagster_project.warehouse import catalog, project
from dagster_project.warehouse.catalog import connect
from tests.conftest import compiled_in_list, copy_home

VIEWS = "group:rynn_vp"
# tables over stg_rvp_judgments (and one view)
MARTS = ("rvp_candidate_scores", "rvp_judge_review", "rvp_leaderboard", "rvp_judgments")
# is_final over every raw row at once: the model's rule, as the table held before it was kept
# part by part
EXPECTED = """
SELECT * EXCLUDE (filename) REPLACE (row_number() OVER (
           PARTITION BY system, case_id, judge_run_id
           ORDER BY coalesce(attempt_kind = 'manager_review', false) DESC, attempt DESC) = 1
           AS is_final),
       parse_filename(filename) AS part
FROM (SELECT *, NULL::BOOLEAN AS is_final, filename
      FROM read_parquet('{home}/tables/raw/rvp_judgments/*.parquet', union_by_name = true))
"""


def _rows(con, query: str) -> list[tuple]:
    return con.execute(f"SELECT * FROM ({query}) ORDER BY ALL").fetchall()


def _held_and_expected(con, home) -> tuple[list[tuple], list[tuple]]:
    """stg_rvp_judgments as held, and as deciding `is_final` over every raw row gives."""
    columns = [c[0] for c in con.execute("DESCRIBE stg_rvp_judgments").fetchall()]
    return (_rows(con, "SELECT * FROM stg_rvp_judgments"),
            _rows(con, f"SELECT {', '.join(columns)} FROM ({EXPECTED.format(home=home)})"))


def _check(home) -> list[tuple]:
    """The published table, checked against the raw rows; its rows."""
    con = connect(home)
    try:
        held, expected = _held_and_expected(con, home)
    finally:
        con.close()
    assert held == expected
    return held


def _parts_read(home) -> list[str] | None:
    """The parts the last build of stg_rvp_judgments read (None: all)."""
    return compiled_in_list(home, "rynn_vp/staging/stg_rvp_judgments",
                            r"parse_filename\(filename\)")


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _later(rec: dict, by: int, kind: str = "retry") -> dict:
    """`rec` as a later attempt of its (system, case, judge run), `by` attempts on."""
    stages = [{**s, "attempt": s["attempt"] + by, "attempt_kind": kind}
              for s in rec.get("stages", ())]
    return {**rec, "attempt": rec["attempt"] + by, "attempt_kind": kind,
            **({"stages": stages} if "stages" in rec else {})}


def _finals(con) -> dict[tuple, int]:
    return {(s, c, r): a for s, c, r, a in _rows(
        con, "SELECT system, case_id, judge_run_id, attempt FROM stg_rvp_judgments "
        "WHERE is_final")}


def _finals_of(home) -> dict[tuple, int]:
    con = connect(home)
    try:
        return _finals(con)
    finally:
        con.close()


@pytest.mark.slow  # four materializations and a dbt build
def test_the_judgments_kept_part_by_part_equal_is_final_decided_over_every_row(
        demo_warehouse, tmp_path, monkeypatch):
    monkeypatch.setattr(judgment_replay, "SEGMENT_ROWS", 1)  # a part per file
    drop = tmp_path / "judgments"
    shutil.copytree(demo_warehouse.judgments_root(), drop)
    settings = copy_home(demo_warehouse, tmp_path / "home", judgments_dir=str(drop))
    home = settings.home
    raw = home / "tables" / "raw" / "rvp_judgments"
    first = [r for r in _records(drop / "judge-run-a.jsonl") if r["attempt_kind"] == "initial"]
    groups = [(r["system"], r["case_id"], r["judge_run_id"]) for r in first[:6]]
    # m-retries.jsonl (after judge-run-*): later attempts, the finals of 3 groups
    _write(drop / "m-retries.jsonl", [_later(r, 10) for r in first[:3]])
    assert materialize(settings, VIEWS, checks=False).success
    _check(home)
    assert [_finals_of(home)[g] for g in groups[:3]] == [11] * 3

    # zz-more.jsonl: later attempts of 2 other groups and a manager review of one more, the new
    # finals of their groups; m-retries.jsonl deleted (its records stay: nothing is lost)
    before = {p.name for p in raw.glob("0*.parquet")}
    (drop / "m-retries.jsonl").unlink()
    _write(drop / "zz-more.jsonl", [_later(r, 20) for r in first[3:5]]
           + [{**_later(r, 30, "manager_review"),
               "review": {"author": "lead", "reason": "the judges disagree"}}
              for r in first[5:6]])
    assert materialize(settings, VIEWS, checks=False).success
    new = {p.name for p in raw.glob("0*.parquet")} - before
    held = _check(home)
    assert [_finals_of(home)[g] for g in groups] == [11, 11, 11, 21, 21, 31]
    # read: the new part (zz-more.jsonl's), and the parts without a row, which nothing holds
    # (here the GT compilations' own segments: a footer each)
    with_rows = {r[-1] for r in held}
    assert len(new) == 1 and new <= with_rows
    assert sorted(set(_parts_read(home)) & with_rows) == sorted(new)

    # a part gone with no new row of its groups (m-retries.jsonl's, its file deleted by hand):
    # those groups are left without a final attempt, and their first ones are final again
    con = connect(home)
    (gone,) = {p for (p,) in _rows(con, "SELECT DISTINCT part FROM stg_rvp_judgments "
                                        "WHERE attempt = 11")}
    con.close()
    (raw / gone).unlink()
    with catalog.workspace(home) as ws:
        assert not project.build(["build", "--select", "stg_rvp_judgments"], home=home,
                                 database=ws.database, target=ws.target).error
        con = duckdb.connect(str(ws.database), read_only=True)
        held, expected = _held_and_expected(con, home)
        finals = _finals(con)
        con.close()
    assert held == expected and not set(_parts_read(home)) & with_rows  # no part with rows
    assert [finals[g] for g in groups] == [1, 1, 1, 21, 21, 31]

    # a file sorting first: every later segment is replayed, its part renamed (the judgment
    # step also writes m-retries.jsonl's part again: its table's files are not as written)
    _write(drop / "a-first.jsonl", [{**r, "judge_run_id": "judge-run-0"} for r in first[:4]])
    assert materialize(settings, VIEWS, checks=False).success
    held = _check(home)
    assert not {r[-1] for r in held} & with_rows
    assert {r[3] for r in held} >= {"judge-run-0", "judge-run-a"}
    assert [_finals_of(home)[g] for g in groups] == [11, 11, 11, 21, 21, 31]

    marts = _marts(home)

    # built from scratch (the dbt workspace and catalog deleted): the same rows, and the same
    # tables over them (rebuilt above though the incremental table under them is never
    # digested), to the last bit: the table kept part by part holds its rows in another order
    # than one built from scratch, and every float aggregate orders what it sums
    shutil.rmtree(home / "dbt")
    (home / "benchlake.duckdb").unlink()
    assert materialize(settings, VIEWS, checks=False).success
    assert _parts_read(home) is None
    assert _check(home) == held
    assert _marts(home) == marts


def _marts(home) -> dict[str, list[tuple]]:
    con = connect(home)
    try:
        return {name: _rows(con, f"SELECT * FROM {name}") for name in MARTS}
    finally:
        con.close()
