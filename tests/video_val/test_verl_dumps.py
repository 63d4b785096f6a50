"""verl validation dumps as responses: every mapping rule and every reject reason, on real dump
files written the way verl writes them, parsed by `write_response_part` into real Parquet parts.

Questions here are made up so that the hard cases exist: two sources, consecutive questions with
the same user text and ground truth (only their position tells them apart), and one with the same
text and another ground truth."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from dagster_project.video_val.response_parts import mark_tools
from dagster_project.video_val.responses import ResponseFile, tool_of, write_response_part

SOURCES = {
    "videomme_v1_test": ["What colour is the car?", "How many people walk in?",
                         "What happens next?", "What happens next?",  # same text, same truth
                         "Where is the cup?"],
    "perceptioncomp_test": ["Which object moves first?", "Which object moves first?",  # other truth
                            "Count the red discs."],
}
TRUTH = {"videomme_v1_test": "BCAAD", "perceptioncomp_test": "ABC"}
SYSTEM = "You are a careful reasoning assistant."


OPTIONS = ("one", "two", "three", "four")


def _user(text: str) -> str:
    return f"<video>\n{text}\nA. one\nB. two\nC. three\nD. four\nPlease reason step by step."


def questions() -> pl.DataFrame:
    rows = []
    for source, texts in SOURCES.items():
        for i, text in enumerate(texts):
            rows.append({"uid": f"{source}:{i}", "data_source": source, "row_index": i,
                         "question": text, "options": [
                             {"letter": x, "text": t} for x, t in zip("ABCD", OPTIONS, strict=True)],
                         "user_prompt": _user(text), "ground_truth": TRUTH[source][i],
                         "video_uri": f"file:///videos/{source}_{i}.mp4"})
    return pl.DataFrame(rows)


def dump_rows(order: tuple[str, ...], n: int, step: int = 10) -> list[dict]:
    """What verl writes for a validation pass over `order` with val_kwargs.n = `n`; the
    expected uid and sample_idx are kept aside in `_uid` / `_sample` (removed when written)."""
    out = []
    for source in order:
        for i, text in enumerate(SOURCES[source]):
            truth = TRUTH[source][i]
            for k in range(n):
                letter = "ABCD"[(i + k) % 4]
                out.append({
                    "input": f"system\n{SYSTEM}\nuser\n{_user(text).replace('<video>', '')}"
                             "\nassistant\n",
                    "output": f"<think>looking</think><answer>\\boxed{{{letter}}}</answer>",
                    "gts": truth, "score": float(letter == truth), "step": step,
                    "acc": float(letter == truth), "pred": letter,
                    "reward": float(letter == truth), "_uid": f"{source}:{i}", "_sample": k})
    return out


def parse(tmp_path: Path, rows: list[dict] | str, name: str = "grpo/10.jsonl"):
    """Write the dump under a drop folder, parse it; (accepted rows, rejects) as dicts."""
    path = tmp_path / "drop" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(rows, str):
        path.write_text(rows)
    else:
        path.write_text("".join(json.dumps({k: v for k, v in r.items() if not k.startswith("_")})
                                + "\n" for r in rows))
    f = ResponseFile(name, 1, "0" * 64, path)
    [f], table = mark_tools([f], questions)
    assert f.tool == "verl" and table is not None
    counts = write_response_part(f, tmp_path / "rows.parquet", tmp_path / "rejects.parquet",
                                 table)
    accepted = pq.read_table(tmp_path / "rows.parquet").to_pylist()
    rejects = pq.read_table(tmp_path / "rejects.parquet").to_pylist()
    assert counts == {"rows": len(accepted), "rejects": len(rejects)}
    return accepted, rejects


def _mapping(accepted: list[dict]) -> list[tuple[int, str, int]]:
    return [(r["line"], r["uid"], r["sample_idx"]) for r in accepted]


def _expected(rows: list[dict], skip: set[int] = frozenset()) -> list[tuple[int, str, int]]:
    return [(line, r["_uid"], r["_sample"]) for line, r in enumerate(rows, 1) if line not in skip]


@pytest.mark.parametrize("order", [("videomme_v1_test", "perceptioncomp_test"),
                                   ("perceptioncomp_test", "videomme_v1_test"),
                                   ("perceptioncomp_test",)])
@pytest.mark.parametrize("n", [1, 4])
def test_resolved_by_position_in_any_order_of_the_files(tmp_path, order, n):
    rows = dump_rows(order, n)
    accepted, rejects = parse(tmp_path, rows)
    assert rejects == []
    assert _mapping(accepted) == _expected(rows)  # duplicate texts included: by position
    first = accepted[0]
    assert (first["run_id"], first["step"], first["response"]) == ("grpo", 10, rows[0]["output"])
    assert (first["tool"], first["tool_score"]) == ("verl", rows[0]["score"])
    assert json.loads(first["tool_extras"]) == {"acc": rows[0]["acc"], "pred": rows[0]["pred"],
                                                "reward": rows[0]["reward"]}


def test_a_dump_is_known_by_its_keys_not_its_name(tmp_path):
    path = tmp_path / "run" / "10.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"run_id": "r", "step": 10, "uid": "x:0", "response": "A"}) + "\n")
    assert tool_of(ResponseFile("run/10.jsonl", 1, "0" * 64, path)) is None
    path.write_text(json.dumps({k: v for k, v in dump_rows(("perceptioncomp_test",), 1)[0].items()
                                if not k.startswith("_")}) + "\n")
    assert tool_of(ResponseFile("run/10.jsonl", 1, "0" * 64, path)) == "verl"


def test_a_missing_row_leaves_its_question_one_sample_short(tmp_path):
    rows = dump_rows(("videomme_v1_test", "perceptioncomp_test"), 4)
    missing = 4 * 1 + 2  # the third sample of videomme_v1_test:1
    kept = rows[:missing] + rows[missing + 1:]
    accepted, rejects = parse(tmp_path, kept)
    assert rejects == []
    got = [(uid, k) for _, uid, k in _mapping(accepted)]
    assert got == [(r["_uid"], r["_sample"]) for r in kept if r is not rows[missing]][:missing] + [
        ("videomme_v1_test:1", 2)] + [(r["_uid"], r["_sample"]) for r in kept[missing + 1:]]
    assert sum(uid == "videomme_v1_test:1" for uid, _ in got) == 3


def test_a_question_left_out_of_the_dump_is_stepped_over(tmp_path):
    rows = [r for r in dump_rows(("videomme_v1_test", "perceptioncomp_test"), 2)
            if r["_uid"] != "videomme_v1_test:1"]  # e.g. filtered as an over-long prompt
    accepted, rejects = parse(tmp_path, rows)
    assert rejects == [] and _mapping(accepted) == _expected(rows)


def test_one_row_too_many_is_refused(tmp_path):
    rows = dump_rows(("videomme_v1_test",), 4)
    extra = dict(rows[3])  # a fifth row of videomme_v1_test:0
    rows = rows[:4] + [extra] + rows[4:]
    accepted, rejects = parse(tmp_path, rows)
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (5, "one row too many for videomme_v1_test:0: it has n = 4 rows already (rows of a "
            "prompt are its val_kwargs.n repeats)")]
    assert json.loads(rejects[0]["raw"])["output"] == extra["output"]
    assert _mapping(accepted) == _expected(rows, skip={5})


def test_a_wrong_ground_truth_is_refused_and_keeps_its_place(tmp_path):
    rows = dump_rows(("videomme_v1_test",), 4)
    rows[5]["gts"] = "D"  # videomme_v1_test:1 is C
    accepted, rejects = parse(tmp_path, rows)
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (6, "gts 'D' is not the ground truth 'C' of videomme_v1_test:1, the question at its "
            "position")]
    assert _mapping(accepted) == _expected(rows, skip={6})  # sample 2 stays sample 2


def test_same_text_other_truth_is_told_apart_by_gts(tmp_path):
    rows = dump_rows(("perceptioncomp_test",), 2)
    accepted, _ = parse(tmp_path, rows)
    assert [r["uid"] for r in accepted[:4]] == ["perceptioncomp_test:0"] * 2 + [
        "perceptioncomp_test:1"] * 2


def test_a_shuffled_dump_is_never_guessed(tmp_path):
    rows = dump_rows(("videomme_v1_test", "perceptioncomp_test"), 4)
    random.Random(3).shuffle(rows)
    accepted, rejects = parse(tmp_path, rows)
    assert rejects and len(accepted) + len(rejects) == len(rows)
    texts = {f"{s}:{i}": (t, TRUTH[s][i]) for s, ts in SOURCES.items() for i, t in enumerate(ts)}
    for r in accepted:  # whatever was accepted holds its question's text and ground truth
        source_row = rows[r["line"] - 1]
        text, truth = texts[r["uid"]]
        assert text in source_row["input"] and source_row["gts"] == truth
    assert all("the question at its position" in r["reason"] or "one row too many" in r["reason"]
               for r in rejects)


def test_a_truncated_dump_refuses_its_last_line_only(tmp_path):
    rows = dump_rows(("videomme_v1_test",), 2)
    text = "".join(json.dumps({k: v for k, v in r.items() if not k.startswith("_")}) + "\n"
                   for r in rows)
    accepted, rejects = parse(tmp_path, text[:-40])  # the writer died mid-line
    assert [r["line"] for r in rejects] == [len(rows)]
    assert "JSON" in rejects[0]["reason"]
    assert _mapping(accepted) == _expected(rows, skip={len(rows)})


def test_a_dump_outside_a_run_folder_or_with_another_step(tmp_path):
    rows = dump_rows(("perceptioncomp_test",), 1)
    accepted, rejects = parse(tmp_path, rows, name="10.jsonl")
    assert accepted == [] and len(rejects) == len(rows)
    assert all("RESPONSES_DIR/<run_id>/<global_step>.jsonl" in r["reason"] for r in rejects)
    rows[1]["step"] = 20
    accepted, rejects = parse(tmp_path, rows, name="grpo/10.jsonl")
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (2, "step 20 differs from the file name's step 10")]
    assert [r["line"] for r in accepted] == [1, 3]
