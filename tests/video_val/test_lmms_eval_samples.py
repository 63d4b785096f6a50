"""lmms-eval sample logs as responses: each document matched to its Video-MME question by
content (never by doc_id or position), each reject reason, run and step from the model folder.
Real files written as lmms-eval writes them, parsed by `write_response_part`."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dagster_project.video_val.lmms_eval_samples import samples_location
from dagster_project.video_val.response_parts import mark_tools
from dagster_project.video_val.responses import ResponseFile, write_response_part
from tests.video_val.test_verl_dumps import OPTIONS, SOURCES, TRUTH, questions

MME = "videomme_v1_test"


def sample(i: int, raw: str, *, video_id: str | None = None, target: str | None = None,
           filtered: str | None = None) -> dict:
    """A logged Video-MME document for question `videomme_v1_test:i`, as lmms-eval writes it."""
    options = "\n".join(f"{x}. {t}" for x, t in zip("ABCD", OPTIONS, strict=True))
    out = {"doc_id": 100 + i, "target": target or TRUTH[MME][i],
           "filtered_resps": filtered if filtered is not None else raw, "doc_hash": f"h{i}",
           "videomme_perception_score": {
               "question_id": f"{i:03d}-1", "pred_answer": raw[-1], "answer": TRUTH[MME][i],
               "score": float(raw[-1] == TRUTH[MME][i]),
               "videoID": video_id if video_id is not None else f"{MME}_{i}"},
           "input": f"Select the best answer.\n{SOURCES[MME][i]}\n{options}\nThe best answer is:"}
    if filtered is not None and filtered != raw:
        out["resps"] = raw
    return out


def parse(tmp_path: Path, samples: list[dict] | str,
          name: str = "ckpt__grpo__global_step_80__actor/20261201_samples_videomme.jsonl"):
    path = tmp_path / "drop" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(samples if isinstance(samples, str)
                    else "".join(json.dumps(s) + "\n" for s in samples))
    [f], table = mark_tools([ResponseFile(name, 1, "0" * 64, path)], questions)
    assert f.tool == "lmms-eval"
    write_response_part(f, tmp_path / "rows.parquet", tmp_path / "rejects.parquet", table)
    return (pq.read_table(tmp_path / "rows.parquet").to_pylist(),
            pq.read_table(tmp_path / "rejects.parquet").to_pylist())


def test_documents_matched_by_content_in_any_order(tmp_path):
    order = [4, 0, 3, 1, 2]  # a multi-GPU run: not in doc_id order
    rows, rejects = parse(tmp_path, [sample(i, f"answer {'ABCD'[i % 4]}") for i in order])
    assert rejects == []
    assert [r["uid"] for r in rows] == [f"{MME}:{i}" for i in order]
    assert {(r["run_id"], r["step"], r["sample_idx"], r["tool"]) for r in rows} == {
        ("ckpt__grpo_actor", 80, 0, "lmms-eval")}
    first = json.loads(rows[0]["tool_extras"])
    assert (first["doc_id"], first["pred_answer"]) == (104, "A")
    assert rows[0]["tool_score"] == float(TRUTH[MME][4] == "A")


def test_same_text_told_apart_by_video_then_refused_when_it_cannot(tmp_path):
    # questions 2 and 3 have the same text, options and truth: only the video tells them apart
    rows, rejects = parse(tmp_path, [sample(3, "A"), sample(2, "A")])
    assert rejects == [] and [r["uid"] for r in rows] == [f"{MME}:3", f"{MME}:2"]
    rows, rejects = parse(tmp_path, [sample(3, "A", video_id="")])
    assert rows == []
    assert rejects[0]["reason"] == (
        f"ambiguous: 2 questions fit ({MME}:2, {MME}:3) and videoID '' does not tell them apart")


def test_no_question_fits(tmp_path):
    rows, rejects = parse(tmp_path, [sample(0, "B", target="D"), sample(1, "C")])
    assert [r["uid"] for r in rows] == [f"{MME}:1"]
    assert [(r["line"], r["reason"]) for r in rejects] == [(1, (
        "no Video-MME question has this input's options and question text with target 'D'"))]
    assert json.loads(rejects[0]["raw"])["doc_id"] == 100


def test_the_raw_response_is_scored_when_logged(tmp_path):
    rows, _ = parse(tmp_path, [sample(0, "<think>it is blue</think>B", filtered="B"),
                               sample(1, "C")])
    assert [r["response"] for r in rows] == ["<think>it is blue</think>B", "C"]


def test_several_responses_and_other_tasks_are_refused(tmp_path):
    many = sample(0, "B")
    many["filtered_resps"] = ["B", "C"]
    rows, rejects = parse(tmp_path, [many, sample(1, "C")])
    assert [r["uid"] for r in rows] == [f"{MME}:1"]
    assert "not one response string" in rejects[0]["reason"]
    rows, rejects = parse(tmp_path, [sample(1, "C")], name="model/20261201_samples_mvbench.jsonl")
    assert rows == [] and "lmms-eval sample log must be" in rejects[0]["reason"]


@pytest.mark.parametrize(("name", "expected"), [
    ("Qwen__Qwen2.5-VL-7B-Instruct/20261201_120000_samples_videomme.jsonl",
     ("Qwen__Qwen2.5-VL-7B-Instruct", 0, MME)),
    ("__ckpt__run1__global_step_120__actor/x_samples_videomme_w_subtitle.jsonl",
     ("ckpt__run1_actor", 120, MME)),
    ("20261201_samples_videomme.jsonl", None),  # no model folder
    ("m/20261201_samples_mmmu_val.jsonl", None),  # not Video-MME
])
def test_run_and_step_from_the_model_folder(name, expected):
    assert samples_location(name) == expected
