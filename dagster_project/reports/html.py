"""The static HTML results browser of an export, from leaderboard to evidence.

`write_html(con, out, profiles, charts, stamp, tables)` writes, beside the CSV/JSON/Parquet/
Markdown files:

* `index.html`: the Rynn-VP leaderboards per profile and judge run (with their charts and the
  side-by-side pairs), and the val scores per policy, run and step, with denominators, standard
  errors and 95 % intervals; sortable; a system opens its cases, a case its evaluation page, a
  run/step its checkpoint page; and links to the export's tables, charts, README and manifest.
* `rvp/<system>/<case_id>.html`, one per evaluation: instruction, S0, the GT anchors with their
  interval labels, the storyboards and panels (or the ordered steps and the evidence gaps), the
  scores per profile and judge run, every judgment attempt with its judge metadata, source file
  and line, its metrics, cited evidence (linked to the frames) and hallucinations (their locus
  highlighted), the packet fingerprints and the GT cache key.
* `rvp/compare/<system>/<base_system>/<case_id>.html`, two systems on one case side by side:
  both storyboards (or steps) under the GT anchors, both scores per profile and judge run with
  the differences of `rvp_case_diffs`, and the hallucinations only one of them has
  (`side_by_side.py` says which pairs get pages).
* `vv/<run_id>/<step>.html`, one per checkpoint: scores per policy and data_source, breakdowns,
  the checkpoint curve, and, for each run's best and last checkpoints, a question browser
  (question, truth, response, extracted letter and method, format flag) filterable to wrong
  answers and to `none` extractions (the other checkpoints link those pages).

Numbers go through one formatter per kind of column (`formatting.py`). Rendered with jinja2
from `templates/` (autoescaped). Every link is relative and every image is in the export folder
(`media/`, hard-linked from the warehouse when on the same file system, else copied), so the
report opens from the file system with no server and survives a move.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from dagster_project.reports.charts import safe_name
from dagster_project.reports.formatting import FILTERS, interval_note, seconds
from dagster_project.reports.markdown import NULL_MARK, format_number
from dagster_project.video_val.policies import default_policy_row
from dagster_project.warehouse.catalog import view_names
from dagster_project.warehouse.seeds import read_seed

TEMPLATES = Path(__file__).with_name("templates")
QUESTION_TEXT_MAX = 4000  # characters of a response shown in the question browser


def latest_report(exports_dir: Path) -> Path | None:
    """The `index.html` of the newest export under `exports_dir` (export folders are named by
    their UTC stamp, so the newest sorts last), or None."""
    found = sorted(Path(exports_dir).glob("*/index.html"), key=lambda p: p.parent.name)
    return found[-1] if found else None


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return NULL_MARK
    if isinstance(value, bool):
        return "true" if value else "false"
    return format_number(float(value)) if isinstance(value, float) else str(value)


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["num"] = _num
    env.filters.update(FILTERS)
    env.filters["sortkey"] = lambda v: "" if v is None else repr(float(v))
    env.globals.update(fmt=FILTERS, interval_note=interval_note)
    return env


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: Iterable[Any] = ()) -> list[dict]:
    rel = con.execute(sql, list(params))
    names = [d[0] for d in rel.description]
    return [dict(zip(names, row, strict=True)) for row in rel.fetchall()]


def _checkpoint_questions(con: duckdb.DuckDBPyConnection, run_id: str, step: int,
                          format_column: str, uids: list[str] | None = None) -> list[dict]:
    """Every counted response of one checkpoint (of its questions `uids` only, when given), as
    vv_scored_responses has it under the default policy (its format rule's column), with its
    question and the start of its text.
    Read from that checkpoint's scored and response parts only (first record of each key, as
    int_vv_later_records decides it: a key repeats only within its checkpoint), so a page costs
    its checkpoint, not the campaign, and holds no more than its rows."""
    return _rows(con, f"""
        WITH scored AS (
            SELECT * FROM stg_vv_scored_responses WHERE run_id = $1 AND step = $2
              AND ($3::VARCHAR[] IS NULL OR list_contains($3::VARCHAR[], uid))
            QUALIFY row_number() OVER (PARTITION BY uid, sample_idx
                                       ORDER BY source_file, file_version, line) = 1
        ),
        responses AS (
            SELECT source_file, file_version, line,
                   left(response, {QUESTION_TEXT_MAX}) AS response
            FROM stg_vv_responses WHERE run_id = $1 AND step = $2
        )
        SELECT s.run_id, s.step, s.uid, s.sample_idx, q.question,
               list_transform(q.options, lambda o: o.letter || '. ' || o.text) AS options,
               s.ground_truth, s.extracted, s.extraction_method, s.correct,
               s."{format_column}" AS format_ok, r.response
        FROM scored AS s
        JOIN vv_questions AS q USING (uid)
        LEFT JOIN responses AS r ON r.source_file = s.source_file
              AND r.file_version = s.file_version AND r.line = s.line
        ORDER BY s.uid, s.sample_idx""", [run_id, step, uids])


def evaluation_page(evaluation_id: str) -> str:
    """Where the page of an evaluation (`<system>/<case_id>`) is, relative to the export."""
    system, _, case_id = evaluation_id.partition("/")
    return f"rvp/{safe_name(system)}/{safe_name(case_id)}.html"


def checkpoint_page(run_id: str, step: int) -> str:
    return f"vv/{safe_name(run_id)}/{int(step)}.html"


class _Media:
    """Images copied (hard-linked) into `<out>/media/` once each, named after their path in the
    warehouse (relative to the home, so the same warehouse content gives the same report)."""

    def __init__(self, out: Path) -> None:
        self.out, self.done = out, {}

    def __call__(self, row: dict) -> str | None:
        abspath, path = row.get("image_abspath"), row.get("image_path")
        if not abspath or not path:
            return None
        if abspath not in self.done:
            src = Path(abspath)
            if not src.is_file():
                self.done[abspath] = None
                return None
            rel = f"media/{safe_name(path)}"
            dest = self.out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                try:
                    os.link(src, dest)
                except OSError:
                    shutil.copyfile(src, dest)
            self.done[abspath] = rel
        return self.done[abspath]


def _write(out: Path, rel: str, text: str) -> str:
    path = out / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return rel


def write_html(con: duckdb.DuckDBPyConnection, out: Path, profiles: list[str],
               charts: list[str], stamp: str, tables: Sequence[str] = ()) -> list[str]:
    """Write the HTML report into the export folder `out`; returns the pages written (relative).
    `tables` are the views the export wrote (the index links their files)."""
    env = _environment()
    views = set(view_names(con))
    media = _Media(out)
    written: list[str] = []
    common = {"stamp": stamp, "se_note": "clustered by case for Rynn-VP, by video for the val "
                                         "suite; see the README"}
    boards: list[dict] = []
    if {"rvp_leaderboard", "rvp_candidate_scores", "rvp_evaluations"} <= views:
        data = _load_rvp(con, views)
        boards = _boards(con, profiles, charts, set(data["evaluations"]))
        compares: dict[str, list[dict]] = {}
        if "rvp_case_diffs" in views:
            from dagster_project.reports.side_by_side import write_side_by_side_pages

            pages, compares = write_side_by_side_pages(con, env, out, media, common, data,
                                                       boards, profiles)
            written += pages
        written = _evaluation_pages(env, out, media, common, data, compares) + written
    val = _val_policies(con, charts) if "vv_leaderboard" in views else []
    checkpoint_pairs: list[dict] = []
    if val:
        written += _checkpoint_pages(con, env, out, common, charts, views)
        if {"vv_question_history", "vv_questions", "vv_run_pairs", "vv_power",
                "vv_best_checkpoints"} <= views:
            pages, checkpoint_pairs = _vv_compare_pages(con, env, out, common)
            written += pages
    index = env.get_template("index.html.j2").render(
        root="", boards=boards, val_policies=val, compares=checkpoint_pairs,
        files=_export_files(tables, charts), **common)
    written.insert(0, _write(out, "index.html", index))
    return written


# --- index ---------------------------------------------------------------------------------------


def _boards(con: duckdb.DuckDBPyConnection, profiles: list[str], charts: list[str],
            pages: set[str]) -> list[dict]:
    board_rows = _rows(con, "SELECT * FROM rvp_leaderboard WHERE profile IN "
                            "(SELECT unnest(?::VARCHAR[]))", [profiles])
    cases = _rows(con, "SELECT profile, judge_run_id, system, case_id, scene, status, final_score, "
                       "legacy_final_score FROM rvp_candidate_scores WHERE profile IN "
                       "(SELECT unnest(?::VARCHAR[])) ORDER BY case_id", [profiles])
    by_board: dict[tuple, list[dict]] = defaultdict(list)
    for r in board_rows:
        by_board[(r["profile"], r["judge_run_id"])].append(r)
    case_rows: dict[tuple, list[dict]] = defaultdict(list)
    for c in cases:
        evaluation = f"{c['system']}/{c['case_id']}"
        c["page"] = evaluation_page(evaluation) if evaluation in pages else None
        case_rows[(c["profile"], c["judge_run_id"], c["system"])].append(c)
    boards = []
    for (profile, run), rows in by_board.items():
        anchor = f"board-{safe_name(profile)}-{safe_name(run)}"
        systems = []
        for r in rows:
            r["cases_anchor"] = f"{anchor}-{safe_name(r['system'])}"
            systems.append({"system": r["system"], "anchor": r["cases_anchor"],
                            "cases": case_rows[(profile, run, r["system"])]})
        mine = [c for c in charts if c.startswith(("charts/rvp_leaderboard_",
                                                   "charts/rvp_scene_heatmap_"))
                and c.endswith(f"_{safe_name(profile)}_{safe_name(run)}.png")]
        boards.append({"profile": profile, "judge_run_id": run, "anchor": anchor, "rows": rows,
                       "systems": systems, "charts": mine})
    return boards


def _export_files(tables: Sequence[str], charts: list[str]) -> dict[str, Any]:
    """What the index lists of the export folder: its README and manifest, every table in its
    four formats, and every chart."""
    return {"tables": [{"view": v, "formats": [(f, f"{v}.{f}") for f in
                                                ("csv", "parquet", "md", "json")]}
                       for v in tables],
            "charts": charts}


def _val_policies(con: duckdb.DuckDBPyConnection, charts: list[str]) -> list[dict]:
    rows = _rows(con, """
        SELECT * FROM vv_leaderboard ORDER BY is_default DESC, policy, run_id, step""")
    policies: dict[str, dict] = {}
    for r in rows:
        r["page"] = checkpoint_page(r["run_id"], r["step"])
        chart = f"charts/vv_accuracy_by_step_{safe_name(r['policy'])}.png"
        entry = policies.setdefault(r["policy"], {
            "policy": r["policy"], "is_default": r["is_default"], "rows": [],
            "charts": [c for c in charts if c == chart]})
        entry["rows"].append(r)
    return list(policies.values())


# --- one page per Rynn-VP evaluation -------------------------------------------------------------

_METRIC = re.compile(r"^(pi|vr|vq)(_d?[0-9]+)?$")


def _grouped(rows: list[dict], key: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        out[r[key]].append(r)
    return out


def _locus_hits(h: dict, frames: list[dict], intervals: list[dict]) -> list[dict]:
    """The frames a hallucination's locus points to: its step, or the anchors and panels of its
    interval (`3.7s-5.4s` as written in the GT, or the interval's ordinal)."""
    locus = str(h["locus"] or "").strip()
    if h["locus_kind"] == "step":
        return [f for f in frames if f["role"] == "step" and f["step_id"] == locus]
    match = [i for i in intervals if i["interval"] == locus or str(i["ordinal"]) == locus]
    def inside(f: dict, i: dict) -> bool:
        if f["role"] == "anchor":
            return f["interval_ordinal"] == i["ordinal"]
        return (f["role"] == "panel" and f["used_s"] is not None and i["start_s"] is not None
                and i["start_s"] <= f["used_s"] <= i["end_s"])

    return [f for i in match for f in frames if inside(f, i)]


def _frame_label(frame: dict) -> str:
    """A frame as a link text: its evidence id on the page, and its time when it has one."""
    time = frame.get("used_s")
    return frame["short_id"] + (f" ({seconds(time)})" if time is not None else "")


def _linked(text: str, anchors: dict[str, dict]) -> list[tuple[str, str | None]]:
    """`text` cut into (part, anchor) pieces: every evidence id it quotes (as the judge records
    cite them, `<system>/<case_id>#P15`) becomes its short id linked to that frame on the page."""
    ids = sorted((e for e in anchors if e in text), key=len, reverse=True)
    if not ids:
        return [(text, None)]
    pieces = re.split("(" + "|".join(re.escape(e) for e in ids) + ")", text)
    return [(anchors[p]["short_id"], anchors[p]["anchor"]) if p in anchors else (p, None)
            for p in pieces if p]


def _load_rvp(con: duckdb.DuckDBPyConnection, views: set[str]) -> dict[str, Any]:
    """Every Rynn-VP table the evaluation and side-by-side pages show, read once, grouped."""
    def table(view: str, order: str) -> list[dict]:
        return _rows(con, f"SELECT * FROM {view} ORDER BY {order}") if view in views else []

    return {
        "evaluations": {e["evaluation_id"]: e for e in table("rvp_evaluations", "evaluation_id")},
        "cases": {c["case_id"]: c for c in table("rvp_cases", "case_id")},
        "intervals": _grouped(table("rvp_intervals", "case_id, ordinal"), "case_id"),
        "frames": _grouped(table("rvp_evidence_frames", "evaluation_id, role, ordinal"),
                           "evaluation_id"),
        "storyboards": _grouped(table("rvp_storyboards", "evaluation_id, storyboard_no"),
                                "evaluation_id"),
        "judgments": _grouped(table("rvp_judgments", "evaluation_id, judge_run_id, attempt"),
                              "evaluation_id"),
        "hallucinations": _grouped(table("rvp_hallucinations", "evaluation_id, judge_run_id, "
                                                               "attempt, hallucination_no"),
                                   "evaluation_id"),
        "scores": _grouped([dict(r, evaluation_id=f"{r['system']}/{r['case_id']}")
                            for r in table("rvp_candidate_scores", "profile, judge_run_id")],
                           "evaluation_id"),
        "packets": _grouped(table("rvp_judge_packets", "evaluation_id, role"), "evaluation_id"),
        "gt": _grouped(table("rvp_gt_cache", "case_id"), "case_id"),
    }


def _page_frames(rows: list[dict], root: str, media: _Media) -> dict[str, list[dict]]:
    """An evaluation's evidence frames by role, each with its anchor on the page, its short id
    (`P15`, `A3`, `step-02`) and its image's path from the page."""
    by_role: dict[str, list[dict]] = defaultdict(list)
    for f in rows:
        short = f["evidence_id"].rpartition("#")[2]
        by_role[f["role"]].append(dict(f, anchor="ev-" + safe_name(short), short_id=short,
                                       src=(root + s) if (s := media(f)) else None, hit=False))
    return by_role


def _case_or_placeholder(data: dict[str, Any], case_id: str) -> dict:
    return data["cases"].get(case_id, {"instruction": NULL_MARK, "scene": None,
                                       "source_group": None})


def _evaluation_pages(env: Any, out: Path, media: _Media, common: dict, data: dict[str, Any],
                      compares: dict[str, list[dict]]) -> list[str]:
    hallucinations, judgments = data["hallucinations"], data["judgments"]
    template = env.get_template("evaluation.html.j2")
    written = []
    for eid, ev in data["evaluations"].items():
        rel = evaluation_page(eid)
        root = "../" * rel.count("/")
        case_intervals = data["intervals"].get(ev["case_id"], [])
        by_role = _page_frames(data["frames"].get(eid, []), root, media)
        flat = [f for fs in by_role.values() for f in fs]
        anchors = {f["evidence_id"]: f for f in flat}
        attempts = []
        for j in judgments.get(eid, []):
            mine = [h for h in hallucinations.get(eid, [])
                    if h["judge_run_id"] == j["judge_run_id"] and h["attempt"] == j["attempt"]]
            marked = []
            for h in mine:
                hits = _locus_hits(h, flat, case_intervals)
                for f in hits:
                    f["hit"] = f["hit"] or bool(j["is_final"])
                marked.append(dict(h, frames=[{"anchor": f["anchor"], "label": _frame_label(f)}
                                              for f in hits],
                                   observations=[_linked(o, anchors) for o in
                                                 h["contradictory_observations"] or []]))
            cited = [{"short_id": e.rpartition("#")[2],
                      "anchor": anchors[e]["anchor"] if e in anchors else ""}
                     for e in (j.get("evidence") or [])]
            attempts.append(dict(j, hallucinations=marked, evidence=cited,
                                 metrics=[(k, v) for k, v in j.items() if _METRIC.match(k)]))
        page = template.render(
            root=root, ev=ev, case=_case_or_placeholder(data, ev["case_id"]),
            scores=data["scores"].get(eid, []), frames=by_role,
            storyboards=[dict(b, src=(root + s) if (s := media(b)) else "")
                         for b in data["storyboards"].get(eid, [])],
            judgments=attempts, packets=data["packets"].get(eid, []),
            gt=data["gt"].get(ev["case_id"], []),
            compares=[dict(c, href=root + c["page"]) for c in compares.get(eid, [])],
            **common)
        written.append(_write(out, rel, page))
    return written


# --- one page per val checkpoint -----------------------------------------------------------------


def _checkpoint_pages(con: duckdb.DuckDBPyConnection, env: Any, out: Path, common: dict,
                      charts: list[str], views: set[str]) -> list[str]:
    policy_row = default_policy_row()
    policy = policy_row["policy"]
    format_column = {r["rule"]: r["column"] for r in read_seed("vv_format_rules")}[
        policy_row["format_rule"]]
    scores = _grouped([dict(r, key=(r["run_id"], r["step"])) for r in _rows(
        con, "SELECT * FROM vv_scores ORDER BY policy, run_id, step, data_source")], "key")
    breakdowns = _grouped([dict(r, key=(r["run_id"], r["step"])) for r in _rows(
        con, "SELECT * FROM vv_breakdowns WHERE policy = ? AND n_responded > 0 "
             "ORDER BY data_source, dimension, value", [policy])], "key")
    browsed: set[tuple] = set()
    if {"stg_vv_scored_responses", "stg_vv_responses", "vv_questions",
            "vv_best_checkpoints"} <= views:
        browsed = {(r["run_id"], r["step"]) for r in _rows(con, """
            SELECT run_id, best_step AS step FROM vv_best_checkpoints WHERE policy = $1
            UNION SELECT run_id, max(step) FROM vv_scores WHERE policy = $1 GROUP BY run_id""",
            [policy])}
    best = dict(con.execute("SELECT run_id, best_step FROM vv_best_checkpoints WHERE policy = ?",
                            [policy]).fetchall()) if "vv_best_checkpoints" in views else {}
    template = env.get_template("checkpoint.html.j2")
    written = []
    for run_id, step in sorted(scores):
        rel = checkpoint_page(run_id, step)
        root = "../" * rel.count("/")
        page = template.render(
            root=root, run_id=run_id, step=step, policy=policy, scores=scores[(run_id, step)],
            browsed=[{"label": f"{run_id} step {s} ({'best' if s == best.get(run_id) else 'last'})",
                      "href": root + checkpoint_page(run_id, s)}
                     for r, s in sorted(browsed) if r == run_id],
            breakdowns=breakdowns.get((run_id, step), []),
            questions=(_checkpoint_questions(con, run_id, step, format_column) or None)
            if (run_id, step) in browsed else None,
            charts=[root + c for c in charts if c.startswith("charts/vv_accuracy_by_step_")],
            **common)
        written.append(_write(out, rel, page))
    return written


def _vv_compare_pages(con: duckdb.DuckDBPyConnection, env: Any, out: Path,
                      common: dict) -> tuple[list[str], list[dict]]:
    """The compare and question pages of the default policy (`reports/val_compare.py`)."""
    from dagster_project.reports.val_compare import write_compare_pages  # it imports this module

    policy_row = default_policy_row()
    format_column = {r["rule"]: r["column"] for r in read_seed("vv_format_rules")}[
        policy_row["format_rule"]]
    return write_compare_pages(
        con, env, out, common, policy_row["policy"],
        lambda run_id, step, uids: _checkpoint_questions(con, run_id, step, format_column, uids))
