"""The val suite question by question in the results browser: compare pages for pairs of
checkpoints, and one page per question with its history across every run.

`write_compare_pages` writes, under the default scoring policy:

* `vv/compare/<run>/<step>_vs_<base_run>_<base_step>.html` for a bounded set of pairs
  (`compared_pairs`): per run its last checkpoint against its best, its best against the
  previous best (the best of the steps before it), each of its last `LAST_STEPS` checkpoints
  against the one before, and its best against the best run's best. One row per question either
  side answered (letters, share right, delta, extraction), filterable in the page to changes,
  wrong answers, extraction failures and a category; the gains and losses per video and
  category above it, with the pair's paired test and minimum detectable difference when
  vv_run_pairs / vv_power hold the pair. Each page reads its two checkpoints' rows of
  vv_question_history, nothing else of the campaign.
* `vv/questions/<uid>.html` for each question on those pages: the question, its per-run strip
  of right / wrong over the steps (vv_question_history), the compare pages where its verdict
  flipped, and its responses at the checkpoints of those flips (the latest
  `RESPONSE_CHECKPOINTS` of them, `RESPONSE_SAMPLES` samples of `RESPONSE_CHARS` characters
  each, read from those checkpoints' parts only).

So an export holds at most (LAST_STEPS + 3) compare pages per run, whatever the number of
checkpoints, each of at most one row per question, and at most one question page per question
of the suite, each of bounded size but for its strip (a span per run of equal verdicts).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from dagster_project.reports.charts import safe_name
from dagster_project.reports.html import _rows, _write, checkpoint_page

LAST_STEPS = 2  # consecutive comparisons for each run's last checkpoints
RESPONSE_CHECKPOINTS = 6  # checkpoints whose responses a question page shows
RESPONSE_SAMPLES = 2  # samples of each
RESPONSE_CHARS = 1500  # characters of each response
TOP_GROUPS = 5  # videos and categories listed per direction on a compare page

Responses = Callable[[str, int, list[str]], list[dict]]


@dataclass(frozen=True)
class Pair:
    """Checkpoint (run_id, step) compared against (base_run_id, base_step)."""

    run_id: str
    step: int
    base_run_id: str
    base_step: int
    labels: tuple[str, ...] = field(default=(), compare=False)


def compare_page(run_id: str, step: int, base_run_id: str, base_step: int) -> str:
    """Where the compare page of a pair is, relative to the export."""
    return (f"vv/compare/{safe_name(run_id)}/{int(step)}_vs_{safe_name(base_run_id)}_"
            f"{int(base_step)}.html")


def question_page(uid: str) -> str:
    return f"vv/questions/{safe_name(uid)}.html"


def compared_pairs(accuracy: dict[tuple[str, int], float | None],
                   best: dict[str, int]) -> list[Pair]:
    """The pairs the browser compares (module notes), from each checkpoint's accuracy (over
    `all`) and each run's best step; ties go to the earliest step, as vv_best_checkpoints'."""
    steps: dict[str, list[int]] = defaultdict(list)
    for run, step in sorted(accuracy):
        steps[run].append(step)
    wanted: dict[tuple, list[str]] = defaultdict(list)

    def add(run: str, step: int, base_run: str, base_step: int, label: str) -> None:
        if (run, step) != (base_run, base_step):
            wanted[(run, step, base_run, base_step)].append(label)

    def rank(run: str, step: int) -> tuple[float, int]:
        value = accuracy[(run, step)]
        return (-value if value is not None else float("inf"), step)

    for run, run_steps in steps.items():
        top = best.get(run)
        if top is None:
            continue
        add(run, run_steps[-1], run, top, "last vs best")
        before = [s for s in run_steps if s < top]
        if before:
            add(run, top, run, min(before, key=lambda s: rank(run, s)), "best vs previous best")
        for i in range(max(1, len(run_steps) - LAST_STEPS), len(run_steps)):
            add(run, run_steps[i], run, run_steps[i - 1], "vs previous step")
    bests = [(run, step) for run, step in sorted(best.items()) if (run, step) in accuracy]
    if bests:
        leader = min(bests, key=lambda c: (rank(*c), c[0]))
        for run, step in bests:
            if run != leader[0]:
                add(run, step, *leader, "best vs the best run's best")
    return [Pair(*key, labels=tuple(labels)) for key, labels in sorted(wanted.items())]


def _strip(steps: list[int], marks: str) -> list[dict]:
    """A run's right/wrong marks over its steps as spans of equal marks (a question's verdict
    changes at a few of hundreds of checkpoints, so a strip stays a few spans long)."""
    spans: list[dict] = []
    for step, mark in zip(steps, marks, strict=True):
        if spans and spans[-1]["mark"] == mark:
            spans[-1]["last"] = step
            spans[-1]["n"] += 1
        else:
            spans.append({"mark": mark, "first": step, "last": step, "n": 1})
    return spans


def _groups(rows: list[dict], key: str) -> dict[str, list[tuple[Any, int]]]:
    def top(counts: Counter) -> list[tuple[Any, int]]:
        return sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[:TOP_GROUPS]

    return {"gains": top(Counter(r[key] for r in rows if (r["delta"] or 0) > 0)),
            "losses": top(Counter(r[key] for r in rows if (r["delta"] or 0) < 0))}


# One compare page's rows: both checkpoints' rows of every question either answered.
_PAIR_ROWS = """
WITH a AS (SELECT * FROM vv_question_history WHERE policy = $policy AND run_id = $run
           AND step = $step),
b AS (SELECT * FROM vv_question_history WHERE policy = $policy AND run_id = $base_run
      AND step = $base_step)
SELECT coalesce(a.uid, b.uid) AS uid, q.category, left(q.question, 60) AS question,
       q.ground_truth, coalesce(q.video_uri, coalesce(a.uid, b.uid)) AS video,
       a.letters, b.letters AS base_letters, a.correct_rate, b.correct_rate AS base_correct_rate,
       a.correct_rate - b.correct_rate AS delta, a.majority_correct,
       b.majority_correct AS base_majority_correct,
       a.extraction_method, b.extraction_method AS base_extraction_method,
       coalesce(a.n_none, 0) + coalesce(b.n_none, 0) > 0 AS failed
FROM a FULL JOIN b USING (uid)
LEFT JOIN vv_questions AS q ON q.uid = coalesce(a.uid, b.uid)
ORDER BY 1
"""


def write_compare_pages(con: duckdb.DuckDBPyConnection, env: Any, out: Path, common: dict,
                        policy: str, responses: Responses) -> tuple[list[str], list[dict]]:
    """Write the compare and question pages (module notes) into the export `out`; returns the
    pages written (relative) and the compare pages as index entries. `responses(run_id, step,
    uids)` gives the counted responses of a checkpoint's questions (the question browser's
    reader)."""
    accuracy = {(r["run_id"], r["step"]): r["accuracy"] for r in _rows(
        con, "SELECT run_id, step, accuracy FROM vv_scores WHERE policy = ? "
             "AND data_source = 'all'", [policy])}
    best = dict(con.execute("SELECT run_id, best_step FROM vv_best_checkpoints WHERE policy = ?",
                            [policy]).fetchall())
    pairs = compared_pairs(accuracy, best)
    stats = {(r["run_id"], r["step"], r["base_run_id"], r["base_step"]): r for r in _rows(con, """
        SELECT p.run_id, p.step, p.base_run_id, p.base_step, p.n_common, p.accuracy_diff,
               p.diff_ci_low, p.diff_ci_high, p.p_value, p.mcnemar_p, w.mde_80
        FROM vv_run_pairs AS p
        LEFT JOIN vv_power AS w USING (policy, run_id, step, base_run_id, base_step, data_source)
        WHERE p.policy = ? AND p.data_source = 'all'""", [policy])}
    template = env.get_template("vv_compare.html.j2")
    written: list[str] = []
    entries: list[dict] = []
    flipped_on: dict[str, list[dict]] = defaultdict(list)  # uid -> compare pages it flipped on
    for pair in pairs:
        entry, rows = _compare_page(con, template, out, common, policy, pair, accuracy, stats)
        written.append(entry["rel"])
        entries.append(entry)
        for r in rows:
            if r["majority_correct"] is not None and r["base_majority_correct"] is not None \
                    and r["majority_correct"] != r["base_majority_correct"]:
                flipped_on[r["uid"]].append(entry)
        entry["uids"] = [r["uid"] for r in rows]
    on_pages = sorted({uid for e in entries for uid in e.pop("uids")})
    written += _question_pages(con, env, out, common, policy, on_pages, flipped_on, responses)
    return written, entries


def _compare_page(con: duckdb.DuckDBPyConnection, template: Any, out: Path, common: dict,
                  policy: str, pair: Pair, accuracy: dict, stats: dict
                  ) -> tuple[dict, list[dict]]:
    rel = compare_page(pair.run_id, pair.step, pair.base_run_id, pair.base_step)
    root = "../" * rel.count("/")
    found = con.execute(_PAIR_ROWS, {"policy": policy, "run": pair.run_id, "step": pair.step,
                                     "base_run": pair.base_run_id, "base_step": pair.base_step})
    names = [d[0] for d in found.description]
    rows = [dict(zip(names, r, strict=True), page=root + question_page(r[0]))
            for r in found.fetchall()]
    entry = {"rel": rel, "labels": pair.labels, "pair": pair,
             "title": f"{pair.run_id} step {pair.step} vs {pair.base_run_id} "
                      f"step {pair.base_step}",
             "accuracy": accuracy.get((pair.run_id, pair.step)),
             "base_accuracy": accuracy.get((pair.base_run_id, pair.base_step)),
             "gains": sum(1 for r in rows if (r["delta"] or 0) > 0),
             "losses": sum(1 for r in rows if (r["delta"] or 0) < 0)}
    page = template.render(
        root=root, pair=pair, entry=entry, rows=rows, policy=policy,
        stats=stats.get((pair.run_id, pair.step, pair.base_run_id, pair.base_step)),
        by_video=_groups(rows, "video"), by_category=_groups(rows, "category"),
        categories=sorted({str(r["category"]) for r in rows if r["category"] is not None}),
        checkpoint_pages=(root + checkpoint_page(pair.run_id, pair.step),
                          root + checkpoint_page(pair.base_run_id, pair.base_step)),
        **common)
    _write(out, rel, page)
    return entry, rows


def _question_pages(con: duckdb.DuckDBPyConnection, env: Any, out: Path, common: dict,
                    policy: str, uids: list[str], flipped_on: dict[str, list[dict]],
                    responses: Responses) -> list[str]:
    wanted = set(uids)
    questions = {r["uid"]: r for r in _rows(con, """
        SELECT uid, data_source, question, ground_truth, task, category, question_type,
               video_uri, list_transform(options, lambda o: o.letter || '. ' || o.text) AS options
        FROM vv_questions""") if r["uid"] in wanted}
    strips: dict[str, list[dict]] = defaultdict(list)
    for r in _rows(con, """
            SELECT uid, run_id, list(step ORDER BY step) AS steps,
                   string_agg(CASE WHEN majority_correct THEN 'r' ELSE 'w' END, ''
                              ORDER BY step) AS marks,
                   any_value(first_right_step) AS first_right_step,
                   any_value(n_flips) AS n_flips, any_value(last_flip_step) AS last_flip_step
            FROM vv_question_history WHERE policy = ?
            GROUP BY uid, run_id ORDER BY uid, run_id""", [policy]):
        if r["uid"] in wanted:
            strips[r["uid"]].append(dict(r, spans=_strip(r["steps"], r["marks"])))
    # the checkpoints of each question's flips, the latest steps first, a bounded number
    shown_at: dict[tuple[str, int], list[str]] = defaultdict(list)
    for uid, entries in flipped_on.items():
        sides = {side for e in entries for side in ((e["pair"].run_id, e["pair"].step),
                                                    (e["pair"].base_run_id, e["pair"].base_step))}
        for checkpoint in sorted(sides, key=lambda c: (-c[1], c[0]))[:RESPONSE_CHECKPOINTS]:
            shown_at[checkpoint].append(uid)
    shown: dict[str, list[dict]] = defaultdict(list)
    for (run_id, step), at in sorted(shown_at.items()):
        taken: Counter[str] = Counter()
        for r in responses(run_id, step, sorted(at)):  # in (uid, sample_idx) order
            taken[r["uid"]] += 1
            if taken[r["uid"]] <= RESPONSE_SAMPLES:
                text = r["response"] or ""
                shown[r["uid"]].append(dict(r, response=text[:RESPONSE_CHARS],
                                            cut=len(text) > RESPONSE_CHARS))
    template = env.get_template("question.html.j2")
    written = []
    for uid in uids:
        rel = question_page(uid)
        root = "../" * rel.count("/")
        page = template.render(
            root=root, uid=uid, q=questions.get(uid, {}), strips=strips.get(uid, []),
            pages=[dict(e, href=root + e["rel"]) for e in flipped_on.get(uid, [])],
            responses=[dict(r, page=root + checkpoint_page(r["run_id"], r["step"]))
                       for r in sorted(shown.get(uid, []), key=lambda r: (
                           r["run_id"], r["step"], r["sample_idx"]))],
            response_checkpoints=RESPONSE_CHECKPOINTS, response_samples=RESPONSE_SAMPLES,
            response_chars=RESPONSE_CHARS, policy=policy, **common)
        written.append(_write(out, rel, page))
    return written
