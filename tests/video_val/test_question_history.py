"""The val suite question by question: vv_question_history, vv_flips and vv_flip_groups on the
demo, each recomputed in plain Python from the scored responses (vv_scored_responses), and the
pairs of checkpoints the results browser compares."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from dagster_project.reports.val_compare import LAST_STEPS, Pair, compared_pairs
from dagster_project.warehouse.catalog import connect


def _rows(con, sql: str, params=()) -> list[dict]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _same(a, b) -> bool:
    return a == pytest.approx(b, rel=1e-12) if isinstance(b, float) else a == b


def _majority(letters: list[str | None]) -> str | None:
    votes = Counter(x for x in letters if x is not None)
    return min(votes, key=lambda x: (-votes[x], x)) if votes else None


def _recomputed(con) -> dict[tuple[str, str, str, int], dict]:
    """(policy, run_id, uid, step) -> the history row, from the responses."""
    samples: dict[tuple, list[dict]] = defaultdict(list)
    for r in _rows(con, "SELECT policy, run_id, step, uid, sample_idx, extracted, "
                        "extraction_method, correct, ground_truth FROM vv_scored_responses"):
        samples[(r["policy"], r["run_id"], r["uid"], r["step"])].append(r)
    out = {}
    for key, rs in samples.items():
        rs.sort(key=lambda r: r["sample_idx"])
        letters = [r["extracted"] for r in rs]
        majority = _majority(letters)
        methods = {r["extraction_method"] for r in rs}
        out[key] = {
            "n_samples": len(rs), "correct_rate": sum(r["correct"] for r in rs) / len(rs),
            "majority_letter": majority, "majority_correct": majority == rs[0]["ground_truth"],
            "agreement": sum(x == majority for x in letters) / len(rs) if majority else 0.0,
            "letters": "".join(x or "-" for x in letters),
            "n_none": sum(r["extraction_method"] == "none" for r in rs),
            "extraction_method": methods.pop() if len(methods) == 1 else "mixed"}
    timelines: dict[tuple, list[int]] = defaultdict(list)
    for policy, run, uid, step in out:
        timelines[(policy, run, uid)].append(step)
    for (policy, run, uid), steps in timelines.items():
        steps.sort()
        rows = [out[(policy, run, uid, s)] for s in steps]
        flips = []
        for i, (step, row) in enumerate(zip(steps, rows, strict=True)):
            row["prev_step"] = steps[i - 1] if i else None
            row["prev_correct_rate"] = rows[i - 1]["correct_rate"] if i else None
            row["flipped"] = bool(i) and row["majority_correct"] != rows[i - 1]["majority_correct"]
            if row["flipped"]:
                flips.append(step)
        right = [s for s, r in zip(steps, rows, strict=True) if r["majority_correct"]]
        for row in rows:
            row.update(n_steps=len(steps), first_right_step=right[0] if right else None,
                       n_flips=len(flips), last_flip_step=flips[-1] if flips else None)
    return out


@pytest.fixture(scope="module")
def demo(demo_warehouse):
    con = connect(demo_warehouse.home)
    yield con
    con.close()


def test_history_equals_a_recomputation_from_the_scored_responses(demo) -> None:
    want = _recomputed(demo)
    got = {(r["policy"], r["run_id"], r["uid"], r["step"]): r
           for r in _rows(demo, "SELECT * FROM vv_question_history")}
    assert set(got) == set(want) and len(got) > 500
    for key, row in want.items():
        for column, value in row.items():
            assert _same(got[key][column], value), (key, column, got[key][column], value)
    # the demo has what the rules are about: flips, samples split, failed extractions
    assert sum(r["flipped"] for r in want.values()) > 20
    assert any(r["extraction_method"] == "mixed" for r in want.values())
    assert any(r["extraction_method"] == "fallback" for r in want.values())  # (no `none` in
    # the demo: every response has a letter somewhere; the unit tests of the YAML hold `none`)
    assert any(0 < r["agreement"] < 1 for r in want.values())
    # filters: the question's attributes, and a duration bucket for every row
    attrs = {r["uid"]: r for r in _rows(demo, "SELECT uid, task, category FROM vv_questions")}
    buckets = Counter()
    for row in got.values():
        assert (row["task"], row["category"]) == (attrs[row["uid"]]["task"],
                                                  attrs[row["uid"]]["category"])
        buckets[row["duration_bucket"]] += 1
    assert set(buckets) <= {"short", "medium", "long", "unknown"} and buckets["short"]


def test_flips_and_their_groups_equal_a_recomputation(demo) -> None:
    history = _recomputed(demo)
    best = {(r["policy"], r["run_id"]): r["best_step"]
            for r in _rows(demo, "SELECT policy, run_id, best_step FROM vv_best_checkpoints")}
    want: dict[tuple, dict] = {}
    for (policy, run, uid, step), row in history.items():
        bases = {}
        if row["prev_step"] is not None:
            bases[row["prev_step"]] = {"vs_previous": True,
                                       "vs_best": row["prev_step"] == best[(policy, run)]}
        if step != best[(policy, run)] and (policy, run, uid, best[(policy, run)]) in history:
            bases.setdefault(best[(policy, run)], {"vs_previous": False, "vs_best": True})
        for base_step, flags in bases.items():
            base = history[(policy, run, uid, base_step)]
            delta = row["correct_rate"] - base["correct_rate"]
            if delta != 0:
                want[(policy, run, step, run, base_step, uid)] = {
                    **flags, "delta": delta,
                    "flipped": row["majority_correct"] != base["majority_correct"],
                    "letters": row["letters"], "base_letters": base["letters"]}
    flips = _rows(demo, "SELECT * FROM vv_flips")
    got = {(r["policy"], r["run_id"], r["step"], r["base_run_id"], r["base_step"], r["uid"]): r
           for r in flips}
    assert len(got) == len(flips)  # one row per pair and question
    assert set(got) == set(want) and len(got) > 100
    for key, row in want.items():
        for column, value in row.items():
            assert _same(got[key][column], value), (key, column, got[key][column], value)
        assert got[key]["direction"] == ("gain" if row["delta"] > 0 else "loss")
    assert {(r["vs_previous"], r["vs_best"]) for r in want.values()} == {
        (True, False), (False, True), (True, True)}
    assert any(not r["flipped"] for r in want.values())  # a rate change with the verdict kept

    # groups: the flips counted per video and category; the gains per source of a pair against
    # its run's best are vv_run_pairs' n_only_run, the losses its n_only_base
    groups = _rows(demo, "SELECT * FROM vv_flip_groups")
    counted: dict[tuple, Counter] = defaultdict(Counter)
    for r in flips:
        pair = (r["policy"], r["run_id"], r["step"], r["base_run_id"], r["base_step"])
        for dimension in ("data_source", "task", "category", "video"):
            counted[(*pair, dimension, r[dimension])]["gains" if r["delta"] > 0
                                                      else "losses"] += 1
            counted[(*pair, dimension, r[dimension])]["net"] += r["delta"]
    assert len(groups) == len(counted)
    for g in groups:
        c = counted[(g["policy"], g["run_id"], g["step"], g["base_run_id"], g["base_step"],
                     g["dimension"], g["value"])]
        assert (g["n_gains"], g["n_losses"]) == (c["gains"], c["losses"])
        assert g["net_delta"] == pytest.approx(c["net"], abs=1e-12)
    pairs = {(r["policy"], r["run_id"], r["step"], r["base_run_id"], r["base_step"],
              r["data_source"]): (r["n_only_run"], r["n_only_base"])
             for r in _rows(demo, "SELECT * FROM vv_run_pairs")}
    checked = 0
    for g in groups:
        key = (g["policy"], g["run_id"], g["step"], g["base_run_id"], g["base_step"], g["value"])
        if g["dimension"] == "data_source" and g["base_step"] == best[key[:2]] and key in pairs:
            assert (g["n_gains"], g["n_losses"]) == pairs[key]
            checked += 1
    assert checked > 10
    by_video = [g for g in groups if g["dimension"] == "video" and g["n_gains"]]
    assert all(g["n_gains"] <= g["pair_gains"] for g in by_video)
    assert any(g["n_gains"] > 1 for g in by_video)


def test_the_browser_compares_a_bounded_set_of_pairs() -> None:
    """Per run: last vs best, best vs the best of the steps before it, the last LAST_STEPS
    steps vs the one before, and each run's best vs the best run's best; never a checkpoint
    against itself, whatever the number of checkpoints."""
    accuracy = {("a", s): acc for s, acc in zip(range(10, 110, 10), (
        0.30, 0.35, 0.35, 0.50, 0.40, 0.45, 0.42, 0.41, 0.44, 0.43), strict=True)}
    accuracy |= {("b", 5): 0.6, ("b", 10): None}
    pairs = compared_pairs(accuracy, {"a": 40, "b": 5})
    assert LAST_STEPS == 2
    assert pairs == [
        Pair("a", 40, "a", 20), Pair("a", 40, "b", 5), Pair("a", 90, "a", 80),
        Pair("a", 100, "a", 40), Pair("a", 100, "a", 90), Pair("b", 10, "b", 5)]
    labels = {(p.run_id, p.step, p.base_run_id, p.base_step): p.labels for p in pairs}
    assert labels[("a", 40, "a", 20)] == ("best vs previous best",)  # 0.35 at 20 and 30: 20
    assert labels[("b", 10, "b", 5)] == ("last vs best", "vs previous step")
    assert labels[("a", 40, "b", 5)] == ("best vs the best run's best",)
    many = {("a", s): 1 - abs(s - 100) / 1e3 for s in range(1, 251)}  # 250 steps, best 100
    assert len(compared_pairs(many, {"a": 100})) == LAST_STEPS + 2
