"""verl validation dumps (`trainer.validation_data_dir`, verl 0.6–0.9) read as response records.

verl writes one `<global_step>.jsonl` per validation pass; a line holds `input` (the prompt
decoded with `skip_special_tokens=True`: role words stay, `<video>` placeholders and vision
tokens are gone), `output`, `gts`, `score`, `step` and the reward's extra keys (`acc`, `pred`,
`reward`, ...). There is no uid: rows follow the validation dataloader, `data.val_files`
concatenated in the order given, each prompt repeated `val_kwargs.n` times in a row. A dump is
accepted as `RESPONSES_DIR/<run_id>/<global_step>.jsonl` and recognised by its keys.

Each row is resolved to its question by position and verified: every piece of the question's
user text (split at `<video>` / `<image>`) must occur in `input`, in order, and `gts` must equal
the question's ground truth. `n` is the most common length of a run of rows with the same
`input`; the order of the data sources is the first of their orderings (and subsets: a run
may validate on one file only) under which every row verifies, else the one under which most
rows do. A question absent from the dump (e.g. filtered as over-long) is stepped over when the
row verifies against one of the next `LOOKAHEAD` questions; a row that verifies nowhere is a
reject with the reason, never a guess. `sample_idx` is the row's position within its
question's n repeats.

Only what the alignment needs is held for the whole file (each distinct `input` once, a few
numbers per row); the rows themselves are streamed twice, the second time into the part.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from dagster_project.records import Record
from dagster_project.video_val.schema import SOURCES

# What verl writes itself; every other key of a line is the reward function's extra info.
BASE_KEYS = ("input", "output", "gts", "score", "step")
# How many questions on a row may skip to (questions the run's dataloader left out).
LOOKAHEAD = 64
_PLACEHOLDER = re.compile(r"<video>|<image>")
_STEP_FILE = re.compile(r"(\d+)\.jsonl")


def is_dump_record(value: Any) -> bool:
    """A verl dump line: `input` and `output`, and not a benchlake record (`response`)."""
    return (isinstance(value, dict) and "input" in value and "output" in value
            and "response" not in value)


def dump_location(source_file: str) -> tuple[str, int] | None:
    """(run_id, step) of `<run_id>/<global_step>.jsonl`, the only place a dump is read from."""
    parts = Path(source_file).parts
    match = _STEP_FILE.fullmatch(parts[-1]) if len(parts) >= 2 else None
    if match is None:
        return None
    return "/".join(parts[:-1]), int(match.group(1))


@dataclass(frozen=True)
class DumpQuestion:
    uid: str
    pieces: tuple[str, ...]  # the user text, without its media placeholders
    ground_truth: str | None


def dump_questions(questions: pl.DataFrame) -> dict[str, list[DumpQuestion]]:
    """data_source → its questions in parquet row order, in the card's order of the files."""
    rank = {source: i for i, source in enumerate(SOURCES.values())}
    out: dict[str, list[DumpQuestion]] = {}
    for uid, source, user, truth in questions.sort("row_index").select(
            "uid", "data_source", "user_prompt", "ground_truth").iter_rows():
        pieces = tuple(p.strip() for p in _PLACEHOLDER.split(user or "") if p.strip())
        out.setdefault(source, []).append(DumpQuestion(uid, pieces, truth))
    return dict(sorted(out.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def _holds(text: str, pieces: tuple[str, ...]) -> bool:
    at = 0
    for piece in pieces:
        found = text.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return bool(pieces)


def _gts(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else json.dumps(value)


@dataclass
class _Row:
    line: int
    input_id: int
    gts: str | None


class _Checker:
    """Whether a row verifies against a question, memoised per (distinct input, question)."""

    def __init__(self, inputs: list[str]):
        self.inputs = inputs
        self.text: dict[tuple[int, str], bool] = {}

    def text_ok(self, row: _Row, q: DumpQuestion) -> bool:
        key = (row.input_id, q.uid)
        if key not in self.text:
            self.text[key] = _holds(self.inputs[row.input_id], q.pieces)
        return self.text[key]

    def ok(self, row: _Row, q: DumpQuestion) -> bool:
        return row.gts == q.ground_truth and self.text_ok(row, q)


Resolution = tuple[str, int] | str  # (uid, sample_idx), or the reason the row is refused


def align(rows: Sequence[_Row], sequence: Sequence[DumpQuestion], n: int,
          check: _Checker) -> list[Resolution]:
    """Each row resolved against `sequence`, the questions in dataloader order."""
    out: list[Resolution] = []
    q, k = 0, 0
    for row in rows:
        if q < len(sequence) and k < n and check.ok(row, sequence[q]):
            out.append((sequence[q].uid, k))
            k += 1
            continue
        ahead = next((j for j in range(q + 1, min(len(sequence), q + 1 + LOOKAHEAD))
                      if check.ok(row, sequence[j])), None)
        if ahead is not None:
            q, k = ahead, 1
            out.append((sequence[q].uid, 0))
            continue
        out.append(_reason(row, sequence, q, k, n, check))
        if q < len(sequence) and k < n and check.text_ok(row, sequence[q]):
            k += 1  # the row holds its place among the n repeats, its gts is wrong
    return out


def _reason(row: _Row, sequence: Sequence[DumpQuestion], q: int, k: int, n: int,
            check: _Checker) -> str:
    if q < len(sequence) and k >= n and check.ok(row, sequence[q]):
        return (f"one row too many for {sequence[q].uid}: it has n = {n} rows already "
                f"(rows of a prompt are its val_kwargs.n repeats)")
    expected = q if k < n or q + 1 >= len(sequence) else q + 1
    if expected >= len(sequence):
        return "more rows than the questions of the data sources in this order"
    question = sequence[expected]
    if check.text_ok(row, question):
        return (f"gts {row.gts!r} is not the ground truth {question.ground_truth!r} of "
                f"{question.uid}, the question at its position")
    return (f"input does not hold the user text of {question.uid}, the question at its "
            f"position (nor of the {LOOKAHEAD} after it)")


def infer_n(rows: Sequence[_Row]) -> int:
    """The most common length of a run of rows with the same input (the smallest on a tie)."""
    runs = Counter(len(list(group)) for _, group in
                   itertools.groupby(rows, key=lambda r: r.input_id))
    if not runs:
        return 1
    return min(runs, key=lambda length: (-runs[length], length))


def _orders(by_source: dict[str, list[DumpQuestion]]) -> Iterator[tuple[str, ...]]:
    """Every ordering of every non-empty subset of the data sources, all of them first."""
    names = list(by_source)
    for size in range(len(names), 0, -1):
        yield from itertools.permutations(names, size)


def resolve(rows: Sequence[_Row], inputs: list[str],
            by_source: dict[str, list[DumpQuestion]]) -> list[Resolution]:
    """Each row's resolution, under the inferred n and the best order of the data sources."""
    n = infer_n(rows)
    check = _Checker(inputs)
    best: tuple[int, list[Resolution]] | None = None
    first = rows[0] if rows else None
    for order in _orders(by_source):
        head = by_source[order[0]][:LOOKAHEAD]
        if first is not None and best is not None and not any(check.ok(first, q) for q in head):
            continue  # the first row is not one of this order's first questions
        sequence = [q for source in order for q in by_source[source]]
        out = align(rows, sequence, n, check)
        accepted = sum(not isinstance(r, str) for r in out)
        if best is None or accepted > best[0]:
            best = (accepted, out)
        if accepted == len(rows):
            break
    if best is None:
        return ["no questions to resolve the rows against (vv_questions is empty)"] * len(rows)
    return best[1]


@dataclass
class DumpScan:
    """Pass one over a dump: what the alignment needs, and the rows refused on their own."""

    rows: list[_Row]
    inputs: list[str]
    refused: dict[int, str]  # line → reason


def record_problem(value: Any, step: int) -> str | None:
    """What makes a dump line unusable on its own."""
    if not is_dump_record(value):
        return "not a verl dump line (needs input and output, as the file's first line has)"
    problems = []
    if not isinstance(value["input"], str):
        problems.append("input is not a string")
    if not isinstance(value["output"], str):
        problems.append("output is not a string")
    line_step = value.get("step")
    if line_step is not None and line_step != step:
        problems.append(f"step {line_step!r} differs from the file name's step {step}")
    return "; ".join(problems) or None


def scan(records: Iterator[Record], step: int) -> DumpScan:
    result = DumpScan([], [], {})
    ids: dict[str, int] = {}
    for rec in records:
        if rec.line is None:
            continue  # a problem of the whole file: the caller reports it
        problem = rec.problem or record_problem(rec.value, step)
        if problem is not None:
            result.refused[rec.line] = problem
            continue
        text = rec.value["input"]
        if text not in ids:
            ids[text] = len(result.inputs)
            result.inputs.append(text)
        result.rows.append(_Row(rec.line, ids[text], _gts(rec.value.get("gts"))))
    return result


def extras(value: dict[str, Any]) -> str | None:
    """The reward function's extra keys of a line, as JSON (what verl's metrics are made of)."""
    rest = {k: v for k, v in value.items() if k not in BASE_KEYS}
    return json.dumps(rest, ensure_ascii=False, sort_keys=True) if rest else None


def score_value(value: dict[str, Any]) -> float | None:
    score = value.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None
    return float(score)
