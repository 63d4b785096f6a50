"""The refusal summary `benchlake materialize` ends with: one entry per rejects view holding
anything refused, its count and its first reasons (the demo refuses one judgment record)."""

from dagster_project.warehouse.catalog import connect
from dagster_project.warehouse.refusals import FIRST_REASONS, refusals, summary


def test_the_demo_refusals_are_summarized_per_view(demo_warehouse):
    found = {r.view: r for r in refusals(demo_warehouse.home)}
    con = connect(demo_warehouse.home)
    expected = {v: n for v in ("rvp_rejects", "rvp_judgment_rejects", "vv_response_rejects")
                if (n := con.execute(f"SELECT count(*) FROM {v}").fetchone()[0])}
    expected_vv = con.execute("SELECT count(*) FROM vv_rejects "
                              "WHERE action <> 'noted'").fetchone()[0]
    if expected_vv:
        expected["vv_rejects"] = expected_vv
    assert {v: r.rows for v, r in found.items()} == expected
    assert "rvp_judgment_rejects" in found  # the demo's out-of-range metric
    judged = found["rvp_judgment_rejects"]
    assert any("outside 0-100" in line for line in judged.first)
    lines = summary(list(found.values()))
    assert lines[0].startswith("refused") and "SELECT * FROM <view>" in lines[0]
    assert all(len(r.first) <= FIRST_REASONS for r in found.values())
    assert summary([]) == []


def test_refusals_are_counted_once_per_fingerprint_of_what_the_view_reads(demo_warehouse):
    from dagster_project.warehouse import catalog

    home = demo_warehouse.home
    counted = {r.view: r for r in refusals(home)}
    outcomes = home / "dbt" / "outcomes.json"
    saved = outcomes.read_text()
    try:
        with catalog.workspace(home) as ws:
            known = ws.outcomes()
            entry = known["refusals:rvp_judgment_rejects"]
            assert entry["rows"] == counted["rvp_judgment_rejects"].rows
            # Same fingerprint: what was recorded is reported, nothing counted again.
            ws.record_outcomes({"refusals:rvp_judgment_rejects": {**entry, "rows": 999}})
        assert {r.view: r.rows for r in refusals(home)}["rvp_judgment_rejects"] == 999
        with catalog.workspace(home) as ws:  # another fingerprint: counted again
            ws.record_outcomes({"refusals:rvp_judgment_rejects": {**entry, "rows": 999,
                                                                   "inputs": "other data"}})
        assert {r.view: r for r in refusals(home)} == counted
    finally:
        outcomes.write_text(saved)
