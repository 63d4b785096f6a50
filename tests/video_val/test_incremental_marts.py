"""The val marts kept one checkpoint at a time (`sql/macros/raw_parts.sql`): after new
checkpoints and a late file that changes an old checkpoint (and with it a run's best), the
incremental tables hold what a build from scratch computes, row for row and bit for bit
(every float aggregate orders what it sums: DuckDB would sum in the order its threads deliver
the rows), and the incremental build read only the parts that changed."""

from __future__ import annotations

import json
import shutil

import duckdb

from dagster_project.parts import PartStore
from dagster_project.runner import materialize
from dagster_project.warehouse import catalog, project
from dagster_project.warehouse.catalog import connect
from tests.conftest import compiled_in_list, copy_home

VIEWS = "key:raw_vv_responses+"
MARTS = ("vv_scores", "vv_breakdowns", "vv_scores_at_k", "vv_run_pairs", "vv_best_checkpoints",
         "vv_leaderboard", "vv_run_deltas", "vv_coverage", "vv_policy_diff_scores",
         "vv_question_history", "vv_flips", "vv_flip_groups", "vv_power")
INCREMENTAL = ("int_vv_checkpoint_scores", "int_vv_checkpoint_breakdowns",
               "int_vv_checkpoint_scores_at_k", "int_vv_pair_comparisons",
               "int_vv_question_steps", "int_vv_question_runs", "int_vv_question_history")


# bookkeeping that tells the builds apart, not the data: the build that wrote each row
BUILD_COLUMNS = {"int_vv_question_steps": "EXCLUDE (build_seq)"}


def _snapshot(home) -> dict[str, list[tuple]]:
    con = connect(home)
    try:
        return {name: con.execute(f"SELECT * {BUILD_COLUMNS.get(name, '')} FROM {name} "
                                  "ORDER BY ALL").fetchall()
                for name in MARTS + INCREMENTAL}
    finally:
        con.close()


def _parts_read(home, model: str) -> list[str] | None:
    """The parts the last build of `model` named in its compiled SQL (None: it read all)."""
    return compiled_in_list(home, f"video_val/intermediate/{model}", r"\bpart")


def _steps_by_run(home) -> dict[str, list[int]]:
    """Every run's checkpoints, in order."""
    con = connect(home)
    try:
        found: dict[str, list[int]] = {}
        for run, step in con.execute("SELECT DISTINCT run_id, step FROM vv_scores ORDER BY ALL"
                                     ).fetchall():
            found.setdefault(run, []).append(step)
        return found
    finally:
        con.close()


def _runs_read(home) -> list[str] | None:
    """The runs the last build of int_vv_question_runs named in its compiled SQL."""
    return compiled_in_list(home, "video_val/intermediate/int_vv_question_runs", "run_id")


def test_incremental_marts_equal_a_build_from_scratch(demo_warehouse, tmp_path):
    drop = tmp_path / "responses"
    shutil.copytree(demo_warehouse.responses_root(), drop)
    settings = copy_home(demo_warehouse, tmp_path / "home", responses_dir=str(drop))
    home = settings.home
    assert materialize(settings, VIEWS, checks=False).success
    con = connect(home)
    truth = dict(con.execute("SELECT uid, ground_truth FROM vv_questions").fetchall())
    best = dict(con.execute("SELECT run_id, best_step FROM vv_best_checkpoints "
                            "WHERE policy = 'card'").fetchall())
    worst = con.execute("SELECT step FROM vv_scores WHERE policy = 'card' AND run_id = 'base-rl' "
                        "AND data_source = 'all' ORDER BY accuracy, step LIMIT 1").fetchone()[0]
    con.close()
    assert best["base-rl"] != worst
    # base-rl's worst checkpoint gets eight right answers per question: it becomes the run's
    # best (every pair of that best is compared again); sft-rl gets a checkpoint at verl-grpo's
    # step 100 (same-step pairs). The old part of base-rl's checkpoint is removed: its rows go.
    late = [{"run_id": "base-rl", "step": worst, "uid": uid, "sample_idx": 100 + i,
             "response": f"<think>sure</think><answer>\\boxed{{{gt}}}</answer>"}
            for uid, gt in sorted(truth.items()) for i in range(8)]
    late += [{"run_id": "sft-rl", "step": 100, "uid": uid, "sample_idx": 0,
              "response": f"<answer>\\boxed{{{gt if n % 3 else 'A'}}}</answer>"}
             for n, (uid, gt) in enumerate(sorted(truth.items()))]
    (drop / "zz-late.jsonl").write_text("".join(json.dumps(r) + "\n" for r in late))
    assert materialize(settings, VIEWS, checks=False).success
    incremental = _snapshot(home)

    # only the two changed checkpoints' questions were read for the per-checkpoint tables
    for model in INCREMENTAL[:3]:
        assert [PartStore.label_of(p.removesuffix(".parquet"))
                for p in _parts_read(home, model)] == [f"base-rl_{worst}", "sft-rl_100"], model
    # the question steps: each changed run's checkpoints from the first changed one on (their
    # previous checkpoint may be another), not the checkpoints before it, no other run's
    steps = _steps_by_run(home)
    parts = [PartStore.label_of(p.removesuffix(".parquet"))
             for p in _parts_read(home, "int_vv_question_steps")]
    assert parts == sorted([f"base-rl_{s}" for s in steps["base-rl"] if s >= worst]
                           + [f"sft-rl_{s}" for s in steps["sft-rl"] if s >= 100]), parts
    assert len(parts) < sum(len(v) for v in steps.values())
    # the per-run table: the two runs that changed, no other
    assert _runs_read(home) == ["base-rl", "sft-rl"]
    assert any(r[1] == "base-rl" and r[2] == worst for r in incremental["vv_best_checkpoints"])
    assert any(r[1] == "sft-rl" and r[2] == 100 for r in incremental["vv_run_pairs"])

    # the uniqueness test of the question steps reads what the last build wrote: those tails
    # (build 2; build 1 was from scratch), and it finds a row held twice there
    with catalog.workspace(home) as ws:
        con = duckdb.connect(str(ws.database))
        last = "(SELECT max(build_seq) FROM int_vv_question_steps)"
        assert con.execute(f"SELECT {last}").fetchone()[0] == 2
        assert sorted(r[0] for r in con.execute(
            f"SELECT DISTINCT part FROM int_vv_question_steps WHERE build_seq = {last}"
        ).fetchall()) == _parts_read(home, "int_vv_question_steps")
        con.execute("INSERT INTO int_vv_question_steps SELECT * FROM int_vv_question_steps "
                    f"WHERE build_seq = {last} ORDER BY ALL LIMIT 1")
        con.close()
        tested = project.build(["test", "--select", "int_vv_question_steps"], home=home,
                               database=ws.database, target=ws.target)
    assert [(r["unique_id"].split(".")[2], r["status"], r["failures"]) for r in tested.results
            if r["unique_id"].startswith("test.")] == [
        ("distinct_in_last_build_int_vv_question_steps_run_id__uid__step__run_id__step", "fail", 1)]

    # the same home built from scratch: the dbt workspace and catalog deleted
    shutil.rmtree(home / "dbt")
    (home / "benchlake.duckdb").unlink()
    assert materialize(settings, VIEWS, checks=False).success
    for model in INCREMENTAL:
        assert _parts_read(home, model) is None, model
    assert _runs_read(home) is None
    scratch = _snapshot(home)
    for name in MARTS + INCREMENTAL:
        assert incremental[name] == scratch[name], name
    assert len(scratch["vv_run_pairs"]) > 50
