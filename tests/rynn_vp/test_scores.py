"""Rynn-VP scoring views against a plain-Python recomputation from the raw demo files, and the
reporting profiles as data (a second profile needs no view SQL change)."""

from __future__ import annotations

import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from dagster_project.settings import SQL_DIR
from dagster_project.warehouse import catalog, project
from dagster_project.warehouse.catalog import connect
from tests.conftest import copy_home, dbt_views

PI_NO_PLAN = {"PI-1": .50, "PI-2": .20, "PI-3": .15, "PI-4": .15}
PI_PLAN = {"PI-1": .40, "PI-2": .20, "PI-3": .15, "PI-4": .15, "PI-5": .10}
VR = {"VR-1": .20, "VR-2": .20, "VR-3": .15, "VR-4": .15, "VR-5": .10, "VR-6": .10,
      "VR-7": .07, "VR-8": .03}
ALL_METRICS = [f"PI-{i}" for i in range(1, 7)] + [f"VR-{i}" for i in range(1, 9)] + ["VQ"] + [
    f"VQ-D{i}" for i in range(1, 8)]


def expected_scores(settings, profile=(0.50, 0.40, 0.10)):
    """Everything recomputed from raw files: task.json, case ids, candidate folders, JSONL."""
    root = Path(settings.rynn_vp_source_or_demo())
    cases = {}
    for case in sorted((root / "cases").iterdir()):
        parts = case.name.split("-")
        plan = "plan" in json.loads((case / "task.json").read_text())
        cases[case.name] = {"plan": plan, "scene": "-".join(parts[1:-4]), "source": parts[0]}
    cands = {}
    for system in sorted(settings.candidates_root().iterdir()):
        for case in system.iterdir():
            cands[(system.name, case.name)] = "video" if (case / "candidate.mp4").exists() \
                else "images"
    records = []
    for f in sorted(settings.judgments_root().glob("*.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if all(isinstance(v, (int, float)) and 0 <= v <= 100 for v in r["metrics"].values()):
                records.append(r)
    final = {}
    for r in records:
        key = (r["judge_run_id"], r["system"], r["case_id"])
        rank = (r.get("attempt_kind") == "manager_review", r["attempt"])
        if key not in final or rank > final[key][0]:
            final[key] = (rank, r)
    runs = sorted({k[0] for k in final})
    systems = sorted({s for s, _ in cands})
    w_pi, w_vr, w_vq = profile
    per_case = {}
    for run in runs:
        for system in systems:
            for case_id, info in cases.items():
                hit = final.get((run, system, case_id))
                if hit is None:
                    continue
                m = hit[1]["metrics"]
                weights = PI_PLAN if info["plan"] else PI_NO_PLAN
                pi = sum(w * m[k] for k, w in weights.items())
                vr = sum(w * m[k] for k, w in VR.items())
                vq = m["VQ"]
                per_case[(run, system, case_id)] = {
                    "pi": pi, "vr": vr, "vq": vq, "final": w_pi * pi + w_vr * vr + w_vq * vq,
                    "legacy": .55 * pi + .45 * vr, "record": hit[1]}
    return cases, cands, runs, systems, per_case


def board(per_case, cases, runs, systems, cands, group=None):
    out = {}
    for run in runs:
        for system in systems:
            modality = {m for (s, _), m in cands.items() if s == system}.pop()
            groups = defaultdict(list)
            for case_id, info in cases.items():
                g = info[group] if group else None
                groups[g].append(per_case.get((run, system, case_id)))
            for g, rows in groups.items():
                scored = [r for r in rows if r is not None]
                def mean(k, sc=scored):
                    return (statistics.fmean(r[k] for r in sc) if sc else None)
                out[(run, system, modality, g)] = {
                    "n_scored": len(scored), "n_cases": len(rows), "pi": mean("pi"),
                    "vr": mean("vr"), "vq": mean("vq"), "final_score": mean("final"),
                    "legacy_final_score": mean("legacy")}
    return out


def approx_equal(got, exp):
    for k, v in exp.items():
        if v is None or isinstance(v, int | list):
            assert got[k] == v, k
        else:
            assert got[k] == pytest.approx(v, abs=1e-9), k


def view(con, sql):
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def test_every_number_of_the_views_recomputed_in_python(demo_warehouse):
    cases, cands, runs, systems, per_case = expected_scores(demo_warehouse)
    con = connect(demo_warehouse.home)
    # candidate scores: scored rows equal, unscored rows NULL (never 0)
    rows = view(con, "SELECT * FROM rvp_candidate_scores WHERE profile = 'current'")
    assert len(rows) == len(runs) * len(systems) * len(cases)
    for r in rows:
        exp = per_case.get((r["judge_run_id"], r["system"], r["case_id"]))
        if exp is None:
            assert r["final_score"] is None and r["pi"] is None and r["status"] != "scored"
        else:
            approx_equal(r, {"pi": exp["pi"], "vr": exp["vr"], "vq": exp["vq"],
                             "final_score": exp["final"],
                             "legacy_final_score": exp["legacy"]})
    for group, name in ((None, "rvp_leaderboard"), ("scene", "rvp_by_scene"),
                        ("source", "rvp_by_source_group")):
        expected = board(per_case, cases, runs, systems, cands, group)
        col = {"scene": "scene", "source": "source_group"}.get(group)
        got = view(con, f"SELECT * FROM {name} WHERE profile = 'current'")
        assert len(got) == len(expected), name
        for g in got:
            key = (g["judge_run_id"], g["system"], g["modality"], g[col] if col else None)
            approx_equal(g, expected[key])
    # per-metric means and hallucination rates
    finals = [v["record"] for v in per_case.values()]
    means = view(con, "SELECT * FROM rvp_metric_means")
    for m in means:
        vals = [r["metrics"][m["metric"]] for r in finals
                if r["judge_run_id"] == m["judge_run_id"] and r["system"] == m["system"]
                and m["metric"] in r["metrics"]]
        assert m["n_scored"] == len(vals) and m["mean"] == pytest.approx(statistics.fmean(vals),
                                                                         abs=1e-9)
    assert {m["metric"] for m in means} <= set(ALL_METRICS)
    rates = view(con, "SELECT * FROM rvp_hallucination_rates")
    for h in rates:
        sel = [r for r in finals if r["judge_run_id"] == h["judge_run_id"]
               and r["system"] == h["system"]]
        assert h["n_scored"] == len(sel)
        assert h["hallucination_rate"] == pytest.approx(
            sum(bool(r["hallucinations"]) for r in sel) / len(sel), abs=1e-9)


def test_missing_candidates_are_excluded_not_zero(demo_warehouse):
    con = connect(demo_warehouse.home)
    rows = view(con, "SELECT system, n_scored, n_cases FROM rvp_leaderboard "
                     "WHERE judge_run_id = 'judge-run-a'")
    partial = [r for r in rows if r["n_scored"] < r["n_cases"]]
    assert partial, "the demo has a system with missing candidates"
    assert con.execute("SELECT count(*) FROM rvp_candidate_scores WHERE status <> 'scored' "
                       "AND final_score IS NOT NULL").fetchone() == (0,)


def test_modalities_are_ranked_separately(demo_warehouse):
    con = connect(demo_warehouse.home)
    rows = view(con, "SELECT modality, rank_in_modality FROM rvp_leaderboard "
                     "WHERE judge_run_id = 'judge-run-a'")
    assert {r["modality"] for r in rows} == {"video", "images"}
    assert sorted(r["rank_in_modality"] for r in rows if r["modality"] == "images") == [1]


def _case_diffs(scores, hallucinations, over):
    """rvp_case_diffs (over = "system") or rvp_judge_run_case_diffs (over = "judge_run_id")
    recomputed from rvp_candidate_scores and rvp_hallucinations rows: every ordered pair of
    sides sharing the other key, the profile and the modality, over the cases both scored."""
    same = "judge_run_id" if over == "system" else "system"
    scored = [s for s in scores if s["final_score"] is not None]
    found = defaultdict(list)  # final judgment -> [(entity key, shown)]
    for h in sorted(hallucinations, key=lambda h: h["hallucination_no"]):
        if h["is_final"]:
            found[(h["judge_run_id"], h["system"], h["case_id"])].append(
                (h["entity"].strip().lower(), f"{h['entity']} @ {h['locus']}"))
    pairs = defaultdict(list)
    for a in scored:
        for b in scored:
            if (a["profile"], a[same], a["modality"], a["case_id"]) == \
                    (b["profile"], b[same], b["modality"], b["case_id"]) and a[over] != b[over]:
                pairs[(a["profile"], a[same], a["modality"], a[over], b[over])].append((a, b))
    out = {}
    for (profile, shared, modality, side, base), cases in pairs.items():
        mean = statistics.fmean(a["final_score"] - b["final_score"] for a, b in cases)
        for a, b in cases:
            diff = a["final_score"] - b["final_score"]
            mine = found[(a["judge_run_id"], a["system"], a["case_id"])]
            theirs = found[(b["judge_run_id"], b["system"], b["case_id"])]
            out[(profile, shared, modality, side, base, a["case_id"])] = {
                "final_score": a["final_score"], "base_final_score": b["final_score"],
                "final_score_diff": diff,
                **{f"{x}_diff": a[x] - b[x] for x in ("pi", "vr", "vq")},
                "n_common": len(cases), "pair_final_score_diff": mean,
                "order_flips": diff * mean < 0,
                "hallucinations_only": [t for k, t in mine if k not in {k for k, _ in theirs}],
                "base_hallucinations_only": [t for k, t in theirs
                                             if k not in {k for k, _ in mine}]}
    return out


def test_case_diffs_recomputed_from_the_candidate_scores(demo_warehouse):
    """Both per-case comparison views equal a recomputation in Python, a case missing on either
    side is no row, and each system pair has rvp_system_pairs' n_common and mean difference."""
    con = connect(demo_warehouse.home)
    scores = view(con, "SELECT * FROM rvp_candidate_scores")
    hallucinations = view(con, "SELECT * FROM rvp_hallucinations")
    for name, over, keys in (
            ("rvp_case_diffs", "system",
             ("profile", "judge_run_id", "modality", "system", "base_system", "case_id")),
            ("rvp_judge_run_case_diffs", "judge_run_id",
             ("profile", "system", "modality", "judge_run_id", "base_judge_run_id", "case_id"))):
        expected = _case_diffs(scores, hallucinations, over)
        got = {tuple(r[k] for k in keys): r for r in view(con, f"SELECT * FROM {name}")}
        assert expected and set(got) == set(expected), name
        for key, exp in expected.items():
            approx_equal(got[key], exp)
    # the demo's planted hallucination (wan-sim, first case) is wan-sim's alone against veo-sim
    diffs = view(con, "SELECT * FROM rvp_case_diffs WHERE system = 'wan-sim' "
                      "AND base_system = 'veo-sim' AND hallucinations_only <> []")
    assert diffs and all(d["base_hallucinations_only"] == [] for d in diffs)
    # unscored cases (wan-sim misses candidates) are not diffs: n_common as rvp_system_pairs
    pairs = view(con, "SELECT * FROM rvp_system_pairs")
    diffs = view(con, "SELECT * FROM rvp_case_diffs")
    for p in pairs:
        rows = [r for r in diffs if
                (r["profile"], r["judge_run_id"], r["system"], r["base_system"]) ==
                (p["profile"], p["judge_run_id"], p["system"], p["base_system"])]
        assert len(rows) == p["n_common"]
        assert statistics.fmean(r["final_score_diff"] for r in rows) == pytest.approx(
            p["final_score_diff"], abs=1e-9)
    assert any(p["n_common"] < len({s["case_id"] for s in scores}) for p in pairs)


@pytest.mark.slow
def test_a_second_profile_is_a_data_change_only(demo_warehouse, tmp_path):
    sql = tmp_path / "sql"
    shutil.copytree(SQL_DIR, sql, ignore=shutil.ignore_patterns("target", "logs"))
    profiles = sql / "seeds" / "rvp_reporting_profiles.csv"
    weights = sql / "seeds" / "rvp_metric_weights.csv"
    with profiles.open("a", encoding="utf-8") as fh:
        fh.write("pi_heavy,0.70,0.20,0.10,0.55,0.45,test profile\n")
    current = [line for line in weights.read_text().splitlines() if line.startswith("current,")]
    with weights.open("a", encoding="utf-8") as fh:
        fh.write("".join(line.replace("current,", "pi_heavy,", 1) + "\n" for line in current))
    changed = {profiles.relative_to(sql), weights.relative_to(sql)}
    untouched = {p.relative_to(sql) for p in sql.rglob("*") if p.is_file()} - changed
    assert all((sql / p).read_bytes() == (SQL_DIR / p).read_bytes() for p in untouched)
    con = dbt_views(sql, demo_warehouse.home, tmp_path)  # dbt builds the copy's views
    cases, cands, runs, systems, per_case = expected_scores(demo_warehouse, (0.70, 0.20, 0.10))
    expected = board(per_case, cases, runs, systems, cands)
    got = view(con, "SELECT * FROM rvp_leaderboard WHERE profile = 'pi_heavy'")
    assert len(got) == len(expected)
    for g in got:
        approx_equal(g, expected[(g["judge_run_id"], g["system"], g["modality"], None)])
    current = view(con, "SELECT * FROM rvp_leaderboard WHERE profile = 'current'")
    assert len(current) == len(got)  # the current profile is still there, unchanged


# the tables the scores are aggregated from, and the views and tables that aggregate them
STORED = ("stg_rvp_judgments", "rvp_candidate_scores")
SCORES = ("int_rvp_axis_scores", "rvp_candidate_scores", "rvp_leaderboard", "rvp_by_scene",
          "rvp_by_source_group", "rvp_metric_means", "rvp_judge_agreement", "rvp_case_diffs",
          "rvp_system_pairs", "rvp_judge_review")


@pytest.mark.slow  # a dbt run of every score model
def test_the_scores_do_not_depend_on_the_order_rows_are_stored_in(demo_warehouse, tmp_path):
    """Every score to the last bit, whatever order the tables under it hold their rows in: an
    incremental table holds them in the order its parts came, a rebuild in another, and DuckDB
    sums a float column in the order it reads it (the float aggregates order their input:
    macros/statistics.sql)."""
    home = copy_home(demo_warehouse, tmp_path / "home").home

    def scores(con) -> dict[str, list[tuple]]:
        return {name: con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
                for name in SCORES}

    with catalog.workspace(home) as ws:
        con = duckdb.connect(str(ws.database))
        before = scores(con)
        for name in STORED:  # the same rows, stored in the reverse order
            con.execute(f"CREATE OR REPLACE TABLE {name} AS "
                        f"SELECT * FROM {name} ORDER BY ALL DESC")
        con.close()
        built = project.build(["run", "--select", " ".join(f"{n}+" for n in STORED),
                               "--exclude", " ".join(STORED)],
                              home=home, database=ws.database, target=ws.target)
        assert built.error is None and built.results
        con = duckdb.connect(str(ws.database), read_only=True)
        after = scores(con)
        con.close()
    assert before["rvp_leaderboard"] and after == before
