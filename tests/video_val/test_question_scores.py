"""The per-checkpoint question scores every score view reads (`video_val/question_scores.py`),
the response parts checked once each (`video_val/part_checks.py`), and data tests and previews
not run again on unchanged inputs (`warehouse/fingerprints.py`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dagster_project.parts import PartStore
from dagster_project.runner import materialize
from dagster_project.video_val.part_checks import (
    QUESTION_INVARIANTS,
    SCORED_INVARIANTS,
    check_new_parts,
)
from dagster_project.video_val.question_scores import (
    later_records_store,
    question_score_parts,
    question_scores_store,
)
from dagster_project.video_val.response_parts import parsed_stores, scored_store
from dagster_project.warehouse.catalog import connect
from tests.conftest import copy_home

RAW = ("key:raw_vv_response_files or key:raw_vv_responses or key:raw_vv_response_rejects or "
       "key:raw_vv_scored_responses or key:raw_vv_question_scores")


def _counted_twice(con) -> tuple[list, list]:
    """The question rows as stored, and as the response-grain view of the counted samples
    (int_vv_accepted_scores: first record of each key) gives them."""
    from_responses = con.execute("""
        WITH votes AS (
            SELECT run_id, step, uid, extracted, count(*) AS n FROM int_vv_accepted_scores
            WHERE extracted IS NOT NULL GROUP BY ALL),
        majority AS (
            SELECT run_id, step, uid, arg_max(extracted, n * 1000 - ascii(extracted)) AS m
            FROM votes GROUP BY ALL)
        SELECT s.run_id, s.step, s.uid, any_value(s.data_source), any_value(s.ground_truth),
               count(*), count(*) FILTER (WHERE s.correct),
               count(*) FILTER (WHERE s.format_card), count(*) FILTER (WHERE s.format_exact),
               any_value(m.m), count(*) FILTER (WHERE s.extracted = m.m),
               count(*) FILTER (WHERE s.extraction_method = 'fallback'),
               count(*) FILTER (WHERE s.extraction_method = 'none'),
               string_agg(coalesce(s.extracted, '-'), '' ORDER BY s.sample_idx)
        FROM int_vv_accepted_scores AS s LEFT JOIN majority AS m USING (run_id, step, uid)
        GROUP BY s.run_id, s.step, s.uid ORDER BY ALL""").fetchall()
    counted = con.execute("""
        SELECT run_id, step, uid, data_source, ground_truth, k, n_correct, n_format_card,
               n_format_exact, majority_letter, n_majority, n_fallback, n_none, letters
        FROM stg_vv_question_scores ORDER BY ALL""").fetchall()
    return counted, from_responses


def test_question_scores_equal_the_accepted_responses_counted(demo_warehouse):
    counted, from_responses = _counted_twice(connect(demo_warehouse.home))
    assert len(counted) > 100
    assert counted == from_responses


def _parts(home: Path) -> set[str]:
    return set(question_scores_store(home).all_keys())


def _part(store: PartStore, key: str, rows: list[dict]) -> None:
    """Part `key` of `store` holding `rows` (every other column of its schema NULL)."""
    schema = store.schema
    store.ensure_schema()
    store.write(key, pa.Table.from_pylist(
        [{name: row.get(name) for name in schema.names} for row in rows], schema=schema))


def test_the_first_record_of_each_key_wins_within_its_checkpoint(tmp_path):
    """Key (r, 10, q:1, 0) is read three times: its first record is line 9 of a.jsonl version 1
    (before line 2 of version 2, and before b.jsonl), so version 2's line 2 (the same response)
    and b.jsonl's line 1 (another) are later, each with that first record and both digests.
    q:2 is read once; the same key at another step is another key."""
    responses, scored = parsed_stores(tmp_path)["vv_responses"], scored_store(tmp_path)
    files = {("a.jsonl", 1): [("q:1", 10, 9, "d-same"), ("q:2", 10, 3, "d2"),
                              ("q:1", 20, 4, "d-later-step")],
             ("a.jsonl", 2): [("q:1", 10, 2, "d-same")],
             ("b.jsonl", 1): [("q:1", 10, 1, "d-other")]}
    for (name, version), records in files.items():
        rows = [{"run_id": "r", "step": step, "uid": uid, "sample_idx": 0, "line": line,
                 "source_file": name, "file_version": version, "response_digest": digest}
                for uid, step, line, digest in records]
        key = responses.key(f"{name}.v{version}", version)
        _part(responses, key, rows)
        _part(scored, scored.key(key, "questions"), rows)
    scores, later = question_score_parts(tmp_path)
    assert len(scores.written) == len(later.written) == 2  # (r, 10) and (r, 20)
    store = later_records_store(tmp_path)
    rows = pa.concat_tables(store.load(k) for k in store.all_keys()).to_pylist()
    first = {"first_source_file": "a.jsonl", "first_file_version": 1, "first_line": 9,
             "first_response_digest": "d-same"}
    assert sorted(rows, key=lambda r: r["source_file"]) == [
        {"run_id": "r", "step": 10, "uid": "q:1", "sample_idx": 0, "source_file": "a.jsonl",
         "file_version": 2, "line": 2, "response_digest": "d-same", **first},
        {"run_id": "r", "step": 10, "uid": "q:1", "sample_idx": 0, "source_file": "b.jsonl",
         "file_version": 1, "line": 1, "response_digest": "d-other", **first}]
    # nothing changed: nothing written again
    scores, later = question_score_parts(tmp_path)
    assert (scores.written, later.written, later.kept) == ([], [], 2)


def test_checkpoints_counted_on_threads_write_what_one_at_a_time_writes(demo_warehouse,
                                                                         tmp_path, monkeypatch):
    """The demo's checkpoints counted four at a time and one at a time: the same parts, byte
    for byte, listed in the same (checkpoint) order."""
    import dagster_project.video_val.question_scores as question_scores

    outcomes = []
    for workers in (1, 4):
        home = tmp_path / f"workers-{workers}"
        for table in ("vv_responses", "vv_scored_responses"):
            shutil.copytree(demo_warehouse.home / "tables" / "raw" / table,
                            home / "tables" / "raw" / table)
        monkeypatch.setattr(question_scores, "WORKERS", workers)
        scores, later = question_score_parts(home)
        parts = {p.relative_to(home): p.read_bytes() for table in ("vv_question_scores",
                                                                    "vv_later_records")
                 for p in sorted((home / "tables" / "raw" / table).glob("*.parquet"))}
        outcomes.append((scores.written, scores.rows_written, later.written, parts))
    one, several = outcomes
    assert len(one[0]) > 5 and one[1] > 100
    assert one == several


@pytest.mark.slow
def test_a_file_rewrites_only_the_checkpoints_it_holds(demo_warehouse, tmp_path):
    """A late file with one more sample of an existing checkpoint, a repeat and a conflict of
    an existing record, and a checkpoint of its own: two parts written, one replaced; the
    first record still wins; the rows equal the response-grain count."""
    drop = tmp_path / "responses"
    shutil.copytree(demo_warehouse.responses_root(), drop)
    settings = copy_home(demo_warehouse, tmp_path / "home", responses_dir=str(drop))
    views = (f"{RAW} or key:stg_vv_question_scores or key:int_vv_accepted_scores or "
             "key:int_vv_response_status or key:vv_responses")
    assert materialize(settings, views, checks=False).success
    before = _parts(settings.home)
    con = connect(settings.home)
    run, step, uid, sample, response = con.execute(
        "SELECT run_id, step, uid, sample_idx, response FROM vv_responses ORDER BY ALL LIMIT 1").fetchone()
    k_before = con.execute("SELECT k FROM stg_vv_question_scores WHERE run_id = ? AND "
                           "step = ? AND uid = ?", [run, step, uid]).fetchone()[0]
    con.close()
    lines = [{"run_id": run, "step": step, "uid": uid, "sample_idx": 97,
              "response": "<answer>\\boxed{A}</answer>"},
             {"run_id": run, "step": step, "uid": uid, "sample_idx": sample,
              "response": response},  # a repeat: ignored
             {"run_id": run, "step": step, "uid": uid, "sample_idx": sample,
              "response": response + " (changed)"},  # a conflict: the first record wins
             {"run_id": "run-new", "step": 5, "uid": uid, "sample_idx": 0,
              "response": "<answer>\\boxed{B}</answer>"}]
    (drop / "zz-late.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert materialize(settings, views, checks=False).success
    after = _parts(settings.home)
    labels = {PartStore.label_of(k) for k in after - before}
    assert labels == {f"{run}_{step}", "run-new_5"}, labels
    assert len(before - after) == 1  # the old part of the checkpoint that got a sample
    con = connect(settings.home)
    statuses = {r[0] for r in con.execute(
        "SELECT status FROM int_vv_response_status WHERE source_file = 'zz-late.jsonl'").fetchall()}
    assert statuses == {"accepted", "duplicate", "conflict"}
    k = con.execute("SELECT k FROM stg_vv_question_scores WHERE run_id = ? AND step = ? "
                    "AND uid = ?", [run, step, uid]).fetchone()[0]
    assert k == k_before + 1
    counted, from_responses = _counted_twice(con)
    assert counted == from_responses


def test_each_part_is_checked_once_and_a_bad_one_is_named(demo_warehouse, tmp_path):
    settings = copy_home(demo_warehouse, tmp_path / "home")
    home = settings.home
    first = check_new_parts(home, "vv_scored_responses", "t", SCORED_INVARIANTS)
    assert first.passed and first.checked > 1 and first.already == 0
    again = check_new_parts(home, "vv_scored_responses", "t", SCORED_INVARIANTS)
    assert again.passed and again.checked == 0 and again.already == first.checked
    store = scored_store(home)
    good = pq.read_table(store.path(store.all_keys()[0]))
    wrong = good.set_column(good.schema.get_field_index("correct"), "correct",
                            pc.invert(good["correct"]))
    pq.write_table(wrong, store.folder / "zz_bad.0123456789abcdef.parquet")
    found = check_new_parts(home, "vv_scored_responses", "t", SCORED_INVARIANTS)
    assert found.checked == 1
    assert found.violations == {
        "correct is the extracted letter equal to the ground truth": ["zz_bad.0123456789abcdef"]}
    # not passed, so read again next time
    assert check_new_parts(home, "vv_scored_responses", "t", SCORED_INVARIANTS).checked == 1


def test_a_question_part_of_two_checkpoints_or_a_repeated_key_is_named(demo_warehouse,
                                                                      tmp_path):
    """The question grain's keys are unique in the table because each part is: one checkpoint
    per part, each question once in it (no data test reads every question)."""
    settings = copy_home(demo_warehouse, tmp_path / "home")
    home = settings.home
    check = "vv_question_parts_valid"
    assert check_new_parts(home, "vv_question_scores", check, QUESTION_INVARIANTS).passed
    store = question_scores_store(home)
    part = pq.read_table(store.path(store.all_keys()[0]))
    moved = part.set_column(part.schema.get_field_index("step"), "step",
                            pa.array([10**6] * part.num_rows, pa.int64()))
    pq.write_table(pa.concat_tables([part, moved.slice(0, 1)]),
                   store.folder / "zz_two.0123456789abcdef.parquet")
    pq.write_table(pa.concat_tables([part, part.slice(0, 1)]),
                   store.folder / "zz_again.0123456789abcdef.parquet")
    found = check_new_parts(home, "vv_question_scores", check, QUESTION_INVARIANTS)
    assert found.checked == 2
    assert found.violations == {"one (run_id, step) per part": ["zz_two.0123456789abcdef"],
                                "(run_id, step, uid) unique in a part":
                                    ["zz_again.0123456789abcdef"]}


@pytest.mark.slow
def test_tests_and_previews_are_not_run_again_on_unchanged_inputs(demo_warehouse, tmp_path):
    settings = copy_home(demo_warehouse, tmp_path / "home")
    select = "key:vv_scores or key:rvp_leaderboard"
    assert materialize(settings, select).success  # another home: everything runs here once
    results = settings.home / "dbt" / "target" / "run_results.json"
    stamp = results.stat().st_mtime_ns
    again = materialize(settings, select)
    assert again.success
    evals = again.get_asset_check_evaluations()
    assert evals and all(e.passed for e in evals)
    assert all("reused" in e.metadata for e in evals if e.asset_key.path[-1] in (
        "vv_scores", "rvp_leaderboard"))
    assert results.stat().st_mtime_ns == stamp  # no dbt command at all
    # one more checkpoint's question rows: vv_scores' tests run again, rvp_leaderboard's not
    store = question_scores_store(settings.home)
    key = store.all_keys()[0]
    extra = pq.read_table(store.path(key))
    extra = extra.set_column(0, "run_id", pa.array(["run-extra"] * extra.num_rows))
    pq.write_table(extra, store.folder / "run-extra_1.0123456789abcdef.parquet")
    third = materialize(settings, select)
    assert third.success
    by_asset: dict[str, set[bool]] = {}
    for e in third.get_asset_check_evaluations():
        by_asset.setdefault(e.asset_key.path[-1], set()).add("reused" in e.metadata)
    assert by_asset["vv_scores"] == {False}
    assert by_asset["rvp_leaderboard"] == {True}
    runs = connect(settings.home).execute(
        "SELECT count(*) FROM vv_scores WHERE run_id = 'run-extra'").fetchone()[0]
    assert runs > 0  # the table was rebuilt with the new rows
