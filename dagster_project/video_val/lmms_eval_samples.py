"""lmms-eval 0.7.x sample logs (`--log_samples`) read as response records, for Video-MME.

lmms-eval writes `<output_path>/<model>/<date>_samples_<task>.jsonl`: per document `doc_id`,
`input` (the task's prompt: instructions, question, the option lines, a post-prompt), `target`,
`filtered_resps` (after its filters and reasoning-tag stripping) and `resps` when they differ,
`doc_hash`, and per-sample metric dicts (Video-MME: `videomme_perception_score` with
`question_id, duration, category, task_category, pred_answer, answer, score, videoID`). Rows are
not in doc_id order on multi-GPU runs, so each is matched by content, never by position: the
Video-MME question whose option lines are the input's, whose question text the input holds and
whose ground truth is `target`; when several questions fit (Video-MME repeats questions across
videos), the one whose video file is `<videoID>.mp4`. No match, or still several, is a reject.

The run is the model folder, without a verl checkpoint's `global_step_<N>` (lmms-eval names the
folder after the model path, e.g. `__ckpt__grpo__global_step_80__actor`), and the step is that N,
else 0. The response scored is `resps` when logged (before lmms-eval stripped the reasoning),
else `filtered_resps`; lmms-eval's own `score` and `pred_answer` are kept beside benchlake's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from dagster_project.video_val.read import option_blocks

SAMPLES_FILE = re.compile(r"(?:.*_)?samples_(?P<task>[A-Za-z0-9_.-]+)\.jsonl")
# lmms-eval task (name prefix) → the val source its documents are
TASKS = {"videomme": "videomme_v1_test"}
_GLOBAL_STEP = re.compile(r"_*global_step_(\d+)_*")
QUESTION_COLUMNS = ["uid", "data_source", "question", "options", "ground_truth", "video_uri"]


def is_samples_record(value: Any) -> bool:
    return isinstance(value, dict) and "doc_id" in value and "filtered_resps" in value


def samples_location(source_file: str) -> tuple[str, int, str] | None:
    """(run_id, step, data_source) of `<model>/<date>_samples_<task>.jsonl`; None elsewhere or
    for a task other than Video-MME's."""
    parts = PurePosixPath(source_file).parts
    match = SAMPLES_FILE.fullmatch(parts[-1]) if len(parts) >= 2 else None
    if match is None:
        return None
    source = next((s for prefix, s in TASKS.items() if match["task"].startswith(prefix)), None)
    if source is None:
        return None
    folder = parts[-2]
    step = _GLOBAL_STEP.search(folder)
    run_id = (_GLOBAL_STEP.sub("_", folder).strip("_") if step else folder) or folder
    return run_id, int(step.group(1)) if step else 0, source


@dataclass(frozen=True)
class _Candidate:
    uid: str
    question: str
    ground_truth: str | None
    video_id: str  # the video file's stem


class QuestionIndex:
    """Questions of one data source keyed by their option lines."""

    def __init__(self, questions: pl.DataFrame, data_source: str):
        self.by_options: dict[tuple[tuple[str, str], ...], list[_Candidate]] = {}
        for row in questions.filter(pl.col("data_source") == data_source).select(
                QUESTION_COLUMNS).iter_rows(named=True):
            key = tuple((o["letter"], o["text"]) for o in row["options"] or [])
            stem = Path((row["video_uri"] or "").split("?")[0]).stem
            self.by_options.setdefault(key, []).append(
                _Candidate(row["uid"], row["question"] or "", row["ground_truth"], stem))

    def match(self, text: str, target: str, video_id: str | None) -> tuple[str | None, str]:
        """(uid, "") or (None, why not)."""
        found = [c for block in option_blocks(text) for c in self.by_options.get(block, [])
                 if c.question and c.question in text and c.ground_truth == target]
        found = list({c.uid: c for c in found}.values())
        if len(found) > 1 and video_id:
            found = [c for c in found if c.video_id == video_id] or found
        if len(found) == 1:
            return found[0].uid, ""
        if not found:
            return None, (f"no Video-MME question has this input's options and question text "
                          f"with target {target!r}")
        return None, (f"ambiguous: {len(found)} questions fit ({', '.join(c.uid for c in found)})"
                      f" and videoID {video_id!r} does not tell them apart")


def _responses(value: dict[str, Any]) -> list[Any]:
    resps = value.get("resps", value.get("filtered_resps"))
    while isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list):
        resps = resps[0]
    return resps if isinstance(resps, list) else [resps]


def _metrics(value: dict[str, Any]) -> dict[str, Any]:
    """The per-sample metric dict (Video-MME: videomme_perception_score)."""
    return next((v for k, v in value.items() if isinstance(v, dict) and "score" in v), {})


def sample_row(value: dict[str, Any], index: QuestionIndex
               ) -> tuple[dict[str, Any] | None, str | None]:
    """(the response row without run/step, None) for a logged sample, or (None, the problem)."""
    text, target = value.get("input"), value.get("target")
    if not isinstance(text, str) or not isinstance(target, str):
        return None, "input or target missing or not a string"
    metrics = _metrics(value)
    uid, why = index.match(text, target, metrics.get("videoID"))
    if uid is None:
        return None, why
    responses = _responses(value)
    if len(responses) != 1 or not isinstance(responses[0], str):
        return None, ("resps / filtered_resps is not one response string (benchlake reads one "
                    "response per logged document)")
    score = metrics.get("score")
    extras = json.dumps({"doc_id": value.get("doc_id"), "doc_hash": value.get("doc_hash"),
                         **metrics}, ensure_ascii=False, sort_keys=True)
    return {"uid": uid, "sample_idx": 0, "response": responses[0],
            "tool_score": float(score) if isinstance(score, int | float) else None,
            "tool_extras": extras}, None
