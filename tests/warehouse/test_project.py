"""dbt's in-process builds (`warehouse/project.py`): the project is parsed once per workspace and
kept (`_parsed`), and a build starts from that parse unless something a parse reads changed."""

from __future__ import annotations

from pathlib import Path

import duckdb

from dagster_project.warehouse import catalog, project

SEED = ["build", "--select", "vv_scoring_policies", "--indirect-selection", "empty"]  # one rule table


def _build(home: Path) -> project.Build:
    with catalog.workspace(home) as ws:
        done = project.build(SEED, home=home, database=ws.database, target=ws.target)
    assert done.error is None and [r["status"] for r in done.results] == ["success"]
    return done


def _policies(home: Path) -> list[tuple]:
    con = duckdb.connect(str(catalog.Workspace(home).database), read_only=True)
    try:
        return con.execute("SELECT * FROM vv_scoring_policies ORDER BY ALL").fetchall()
    finally:
        con.close()


def test_a_build_starts_from_the_kept_parse_until_what_it_read_changes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = catalog.Workspace(home).target
    _build(home)
    [kept] = target.glob("parsed-*.pickle")  # (re)written by each parse, by nothing else
    parsed_at = kept.stat().st_mtime_ns
    first = _policies(home)

    _build(home)  # nothing changed: no parse
    assert list(target.glob("parsed-*.pickle")) == [kept]
    assert kept.stat().st_mtime_ns == parsed_at
    assert _policies(home) == first

    kept.write_bytes(b"not a pickle")  # unreadable (another dbt's, a torn file): parsed again
    _build(home)
    assert list(target.glob("parsed-*.pickle")) == [kept]
    assert kept.read_bytes() != b"not a pickle"
    assert _policies(home) == first


def test_another_value_of_what_the_project_reads_is_another_parse(tmp_path: Path) -> None:
    """The parse holds the home's paths (the sources' `env_var`s): the same workspace built for
    another home, as a moved home is, parses again and keeps only the new parse."""
    home = tmp_path / "home"
    with catalog.workspace(home) as ws:
        target = ws.target
        mine = project._parsed(target, home, ws.database)
        moved = project._parsed(target, tmp_path / "moved", ws.database)
        again = project._parsed(target, home, ws.database)
    assert mine is not None and moved is not None and again is not None
    assert len(list(target.glob("parsed-*.pickle"))) == 1
    # every node as parsed (the kept one is read back, field by field)
    assert sorted(again.nodes) == sorted(mine.nodes)
    assert again.nodes["seed.benchlake.vv_scoring_policies"].config.column_types == \
        mine.nodes["seed.benchlake.vv_scoring_policies"].config.column_types
    # each parse with its own home's paths
    def location(manifest):
        [source] = [s for s in manifest.sources.values() if s.name == "vv_videos"]
        return source.source_meta["external_location"]
    assert f"{home}/tables/raw/" in location(again) == location(mine)
    assert f"{tmp_path / 'moved'}/tables/raw/" in location(moved)


def test_the_row_tests_fail_on_the_rows_at_fault_and_name_their_columns(tmp_path: Path) -> None:
    """`not_null_columns` and `within_range` check every column they list in one test (one dbt
    node, one scan), count the rows at fault, and name in each row the columns it fails on."""
    home = tmp_path / "home"
    seed = "rvp_metric_weights"
    tests = {"not_null_columns": f"not_null_columns_{seed}_profile__axis__metric__plan_rule__weight",
             "within_range": f"within_range_{seed}_weight__1__0"}
    with catalog.workspace(home) as ws:
        done = project.build(["build", "--select", seed, *tests.values(),
                              "--indirect-selection", "empty"],
                             home=home, database=ws.database, target=ws.target)
        assert done.error is None
        assert sorted(r["status"] for r in done.results) == ["pass", "pass", "success"]
        con = duckdb.connect(str(ws.database))
        try:  # one NULL in each of two rows (two columns in one), one weight out of [0, 1]
            con.execute(f"""UPDATE {seed} SET axis = NULL, weight = NULL
                            WHERE metric = 'PI-1' AND plan_rule = 'without_plan'""")
            con.execute(f"UPDATE {seed} SET plan_rule = NULL WHERE metric = 'VQ'")
            con.execute(f"UPDATE {seed} SET weight = 1.5 WHERE metric = 'VR-1'")
            con.execute(f"UPDATE {seed} SET weight = -0.5 WHERE metric = 'VR-2'")
        finally:
            con.close()
        done = project.build(["test", "--select", *tests.values()],
                             home=home, database=ws.database, target=ws.target)
    by_name = {r["unique_id"].split(".")[2]: r for r in done.results}
    nulls, ranges = by_name[tests["not_null_columns"]], by_name[tests["within_range"]]
    n_profiles = len(duckdb.connect(str(catalog.Workspace(home).database), read_only=True)
                     .execute(f"SELECT DISTINCT profile FROM {seed}").fetchall())
    assert (nulls["status"], nulls["failures"]) == ("fail", 2 * n_profiles)
    assert (ranges["status"], ranges["failures"]) == ("fail", 2 * n_profiles)
    con = duckdb.connect(str(catalog.Workspace(home).database), read_only=True)
    try:
        named = con.execute(f"SELECT DISTINCT null_columns, metric FROM ({nulls['compiled_code']}) "
                            "ORDER BY ALL").fetchall()
        ranged = con.execute(f"SELECT DISTINCT out_of_range, weight FROM "
                             f"({ranges['compiled_code']}) ORDER BY ALL").fetchall()
    finally:
        con.close()
    assert named == [("axis, weight", "PI-1"), ("plan_rule", "VQ")]
    assert ranged == [("weight", -0.5), ("weight", 1.5)]
