"""Rynn-VP side by side: two systems on one case, in the results browser.

`rvp/compare/<system>/<base_system>/<case_id>.html` shows both storyboards (or steps) under the
case's GT anchors, both scores per profile and judge run with the differences of
`rvp_case_diffs`, and the hallucinations only one of them has. The pairs are each system and the
one ranked just below it in its modality on each leaderboard shown (`side_by_side_pairs`), which
bounds the pages by (systems - 1) x cases per leaderboard.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb

from dagster_project.reports.charts import safe_name
from dagster_project.reports.html import (
    _case_or_placeholder,
    _Media,
    _page_frames,
    _rows,
    _write,
    evaluation_page,
)


def side_by_side_page(system: str, base_system: str, case_id: str) -> str:
    """Where the side-by-side page of two systems on one case is, relative to the export."""
    return (f"rvp/compare/{safe_name(system)}/{safe_name(base_system)}/"
            f"{safe_name(case_id)}.html")


def side_by_side_pairs(boards: list[dict]) -> list[tuple[str, str]]:
    """The pairs of systems that get side-by-side pages: on every leaderboard shown, each ranked
    system and the one ranked just below it in its modality (the question a leaderboard raises:
    why is this one above that one?), in the orientation of the first board that shows the pair.
    So a campaign of S systems gets at most S - 1 pairs per board (in practice about S - 1 in
    all), not S(S-1)/2, and each pair one page per case both have an evaluation of."""
    pairs: list[tuple[str, str]] = []
    for board in boards:
        ranked = sorted((r for r in board["rows"] if r.get("rank_in_modality") is not None),
                        key=lambda r: (r.get("modality") or "", r["rank_in_modality"],
                                       r["system"]))
        for upper, lower in zip(ranked, ranked[1:], strict=False):
            pair = (upper["system"], lower["system"])
            if upper.get("modality") == lower.get("modality") and pair not in pairs \
                    and pair[::-1] not in pairs:
                pairs.append(pair)
    return pairs


def write_side_by_side_pages(con: duckdb.DuckDBPyConnection, env: Any, out: Path,
                             media: _Media, common: dict, data: dict[str, Any], boards: list[dict],
                   profiles: list[str]) -> tuple[list[str], dict[str, list[dict]]]:
    """One page per side-by-side pair and case both systems have an evaluation of: both
    systems' storyboards (or steps) next to each other under the case's GT anchors, their scores
    under every profile and judge run with the differences of rvp_case_diffs, and each one's
    hallucinations. Also lists each board's pairs with their per-case differences for the index,
    and returns, per evaluation, the side-by-side pages it is on."""
    pairs = side_by_side_pairs(boards)
    diffs = _rows(con, "SELECT * FROM rvp_case_diffs WHERE profile IN "
                       "(SELECT unnest(?::VARCHAR[])) ORDER BY ALL", [profiles])
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for d in diffs:
        by_key[(d["system"], d["base_system"], d["case_id"])].append(d)
    template = env.get_template("side_by_side.html.j2")
    written: list[str] = []
    compares: dict[str, list[dict]] = defaultdict(list)
    for system, base in pairs:
        for case_id in sorted({e["case_id"] for e in data["evaluations"].values()}):
            sides = [f"{system}/{case_id}", f"{base}/{case_id}"]
            if not all(eid in data["evaluations"] for eid in sides):
                continue
            rel = side_by_side_page(system, base, case_id)
            root = "../" * rel.count("/")
            compares[sides[0]].append({"other": base, "page": rel})
            compares[sides[1]].append({"other": system, "page": rel})
            columns = []
            for eid in sides:
                frames = _page_frames(data["frames"].get(eid, []), root, media)
                finals = [h for h in data["hallucinations"].get(eid, []) if h["is_final"]]
                columns.append({
                    "ev": data["evaluations"][eid], "page": root + evaluation_page(eid),
                    "frames": frames, "hallucinations": finals,
                    "storyboards": [dict(b, src=(root + s) if (s := media(b)) else "")
                                    for b in data["storyboards"].get(eid, [])]})
            scores = {(r["profile"], r["judge_run_id"], r["system"]): r
                      for eid in sides for r in data["scores"].get(eid, [])}
            runs = sorted({(p, r) for p, r, _ in scores})
            rows = [{"profile": p, "judge_run_id": r, "side": scores.get((p, r, system)),
                     "base": scores.get((p, r, base)),
                     "diff": next((d for d in by_key[(system, base, case_id)]
                                   if (d["profile"], d["judge_run_id"]) == (p, r)), None)}
                    for p, r in runs]
            gt = columns[0]["frames"]
            page = template.render(
                root=root, system=system, base_system=base,
                case=_case_or_placeholder(data, case_id), case_id=case_id,
                gt=gt.get("S0", []) + gt.get("anchor", []), columns=columns, rows=rows,
                **common)
            written.append(_write(out, rel, page))
    pages = set(written)
    for board in boards:
        board["pairs"] = []
        for system, base in pairs:
            cases = [dict(d, page=p if (p := side_by_side_page(system, base, d["case_id"]))
                          in pages else None)
                     for d in diffs if (d["profile"], d["judge_run_id"], d["system"],
                                        d["base_system"]) == (board["profile"],
                                                              board["judge_run_id"], system, base)]
            if cases:
                board["pairs"].append({
                    "system": system, "base_system": base, "cases": cases,
                    "n_flips": sum(bool(c["order_flips"]) for c in cases),
                    "anchor": f"{board['anchor']}-vs-{safe_name(system)}-{safe_name(base)}"})
    return written, compares
