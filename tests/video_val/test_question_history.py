"""The per-item views on the demo, against a recomputation in Python from the public views they
summarize: vv_question_history from vv_scored_responses (correct rate per question and
checkpoint, first right step, flips), vv_flips from that history, vv_power from vv_run_pairs,
and rvp_case_diffs from rvp_candidate_scores."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from dagster_project.warehouse.catalog import connect, rows


@pytest.fixture(scope="module")
def con(demo_warehouse):
    c = connect(demo_warehouse.home)
    yield c
    c.close()


def test_question_history_is_the_responses_question_by_question(con):
    samples: dict[tuple, list[bool]] = defaultdict(list)
    for r in rows(con, "SELECT policy, run_id, step, uid, correct FROM vv_scored_responses"):
        samples[r["policy"], r["run_id"], r["uid"], r["step"]].append(bool(r["correct"]))
    history = {(r["policy"], r["run_id"], r["uid"], r["step"]): r
               for r in rows(con, "SELECT * FROM vv_question_history")}
    assert len(history) > 100 and set(history) == set(samples)
    per_question: dict[tuple, list[tuple[int, bool]]] = defaultdict(list)
    for key, marks in samples.items():
        rate = sum(marks) / len(marks)
        got = history[key]
        assert got["n_samples"] == len(marks) and math.isclose(got["correct_rate"], rate)
        per_question[key[:3]].append((key[3], rate > 0.5))
    flips_seen = 0
    for question, series in per_question.items():
        series.sort()
        flips = [s for (_, a), (s, b) in zip(series, series[1:], strict=False) if a != b]
        right = [s for s, ok in series if ok]
        flips_seen += len(flips)
        for step, _ in series:
            got = history[(*question, step)]
            assert got["n_flips"] == len(flips), question
            assert got["last_flip_step"] == (flips[-1] if flips else None)
            assert got["first_right_step"] == (right[0] if right else None)
    assert flips_seen > 0  # the demo has questions that change


def test_flips_are_the_changes_against_the_previous_step_and_the_best(con):
    rate = {(r["policy"], r["run_id"], r["uid"], r["step"]): r["correct_rate"]
            for r in rows(con, "SELECT policy, run_id, uid, step, correct_rate "
                               "FROM vv_question_history")}
    best = {(r["policy"], r["run_id"]): r["best_step"]
            for r in rows(con, "SELECT policy, run_id, best_step FROM vv_best_checkpoints")}
    steps: dict[tuple, set[int]] = defaultdict(set)
    for p, r, _, s in rate:
        steps[p, r].add(s)
    expected = set()
    for (p, r, u, s), value in rate.items():
        ordered = sorted(steps[p, r])
        bases = {"best": best.get((p, r))}
        if ordered.index(s) > 0:
            bases["previous"] = ordered[ordered.index(s) - 1]
        for comparison, base in bases.items():
            other = rate.get((p, r, u, base))
            if base is not None and base != s and other is not None and other != value:
                expected.add((p, r, s, base, comparison, u, round(value - other, 9)))
    got = {(f["policy"], f["run_id"], f["step"], f["base_step"], f["comparison"], f["uid"],
            round(f["delta"], 9)) for f in rows(con, "SELECT * FROM vv_flips")}
    assert got == expected and len(got) > 10
    groups = rows(con, "SELECT * FROM vv_flip_groups WHERE group_by = 'video'")
    for g in groups[:50]:
        assert g["gained"] + g["lost"] > 0 and g["gained"] <= g["comparison_gained"]


def test_power_is_the_detectable_difference_of_each_pair(con):
    pairs = rows(con, "SELECT * FROM vv_run_pairs")
    power = {(r["policy"], r["run_id"], r["step"], r["base_run_id"], r["base_step"],
              r["data_source"]): r for r in rows(con, "SELECT * FROM vv_power")}
    assert len(power) == len(pairs) > 0
    z = 1.959964 + 0.841621  # Phi^-1(0.975) + Phi^-1(0.80)
    for p in pairs:
        got = power[p["policy"], p["run_id"], p["step"], p["base_run_id"], p["base_step"],
                    p["data_source"]]
        if p["diff_se"] is None:
            assert got["mde_80"] is None
            continue
        assert math.isclose(got["mde_80"], z * p["diff_se"], abs_tol=1e-12)
        if p["diff_se"] > 0:
            planned = math.ceil(p["n_common"] * (z * p["diff_se"] / 0.01) ** 2)
            assert got["questions_for_1pt"] == planned


def test_case_diffs_are_the_candidate_scores_side_by_side(con):
    scores = {(r["profile"], r["judge_run_id"], r["modality"], r["system"], r["case_id"]): r
              for r in rows(con, "SELECT * FROM rvp_candidate_scores "
                                 "WHERE final_score IS NOT NULL")}
    mean = {(r["profile"], r["judge_run_id"], r["modality"], r["system"], r["base_system"]):
            r["final_score_diff"] for r in rows(con, "SELECT * FROM rvp_system_pairs")}
    expected = {}
    for (pr, j, m, s, c), a in scores.items():
        for (pr2, j2, m2, b, c2), other in scores.items():
            if (pr2, j2, m2, c2) == (pr, j, m, c) and b != s:
                d = a["final_score"] - other["final_score"]
                expected[pr, j, m, s, b, c] = (round(d, 9), d * mean[pr, j, m, s, b] < 0)
    got = {(r["profile"], r["judge_run_id"], r["modality"], r["system"], r["base_system"],
            r["case_id"]): (round(r["final_score_diff"], 9), r["order_flips"])
           for r in rows(con, "SELECT * FROM rvp_case_diffs")}
    assert got == expected and len(got) > 10
    counts = defaultdict(int)
    for key in got:
        counts[key[:5]] += 1
    n_common = {k: r["n_common"] for k, r in (
        ((r["profile"], r["judge_run_id"], r["modality"], r["system"], r["base_system"]), r)
        for r in rows(con, "SELECT * FROM rvp_system_pairs"))}
    assert dict(counts) == {k: v for k, v in n_common.items() if v}
