"""Report exports (`benchlake export`): four formats per view with equal row counts, Markdown
fit for a report, the manifest, deterministic PNG charts, one-line errors from the real CLI, and
the HTML results browser: every evaluation and checkpoint has its page, and a headless Chromium
(driven through chromedriver's W3C WebDriver API, no client library) goes from the leaderboard to
an evaluation page, where the storyboard images load and the scores shown are the views'."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from PIL import Image

from dagster_project.reports import export_reports
from dagster_project.reports.charts import (
    CHART_WIDTH_IN,
    chart_accuracy_by_step,
    chart_leaderboard,
)
from dagster_project.reports.export import PACKAGES, ReportError, report_views
from dagster_project.reports.formatting import FILTERS, PATTERNS, interval_note, p_value, score
from dagster_project.reports.html import (
    checkpoint_page,
    evaluation_page,
    latest_report,
)
from dagster_project.reports.markdown import NULL_MARK, format_number
from dagster_project.reports.side_by_side import side_by_side_page
from dagster_project.reports.val_compare import LAST_STEPS, compare_page, question_page
from dagster_project.settings import Settings
from dagster_project.warehouse.catalog import connect, view_names
from tests.oracles.wheels import in_ci

STAMP = "20260101T000000Z"
SEPARATOR = re.compile(r"^\|(:?-{3,}:?\|)+$")
BENCHLAKE = Path(sys.executable).parent / "benchlake"


@pytest.fixture(scope="module")
def available(demo_warehouse: Settings) -> set[str]:
    con = connect(demo_warehouse.home)
    try:
        return set(view_names(con))
    finally:
        con.close()


@pytest.fixture(scope="module")
def export_dir(demo_warehouse: Settings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_reports(demo_warehouse.home, tmp_path_factory.mktemp("exports"),
                          stamp=STAMP)


def _query(settings: Settings, sql: str) -> list[tuple]:
    con = connect(settings.home)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _markdown_table(path: Path) -> tuple[list[str], list[str]]:
    """(header + separator lines, row lines) of the one table in a Markdown file."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("|")]
    return lines[:2], lines[2:]


def _manifest(export_dir: Path) -> dict:
    return json.loads((export_dir / "manifest.json").read_text(encoding="utf-8"))


def test_the_export_list_is_declared_in_the_dbt_yaml() -> None:
    """Each exported view says so in its own YAML (config.meta.export): a place, a caption, and
    whether it may be missing. The order is the one the exports always had: Rynn-VP, then the
    val suite, then the optional views."""
    views = report_views()
    names = [v.name for v in views]
    assert len(set(names)) == len(names) and len({v.order for v in views}) == len(views)
    assert names[:3] == ["rvp_leaderboard", "rvp_by_scene", "rvp_by_source_group"]
    assert names.index("rvp_judge_agreement") < names.index("vv_scores")
    assert "vv_scoring_policies" in names  # a seed is exported like a model
    assert [v.name for v in views if v.optional] == ["rvp_profile_diff"] == names[-1:]
    assert all(v.caption.endswith(".") and "  " not in v.caption for v in views)


def test_every_view_in_four_formats_with_equal_row_counts(export_dir: Path,
                                                          available: set[str]) -> None:
    expected = [v.name for v in report_views() if v.name in available]
    assert {"rvp_leaderboard", "rvp_by_scene", "vv_scores", "vv_best_checkpoints"} <= set(expected)
    assert export_dir.name == STAMP
    assert [p.name for p in export_dir.parent.iterdir()] == [STAMP]  # no temp folder left behind
    manifest = _manifest(export_dir)
    assert list(manifest["views"]) == expected
    for view in expected:
        with (export_dir / f"{view}.csv").open(newline="", encoding="utf-8") as fh:
            csv_rows = list(csv.reader(fh))[1:]
        json_rows = json.loads((export_dir / f"{view}.json").read_text(encoding="utf-8"))
        parquet_rows = pq.read_metadata(export_dir / f"{view}.parquet").num_rows
        _, md_rows = _markdown_table(export_dir / f"{view}.md")
        counts = {len(csv_rows), len(json_rows), parquet_rows, len(md_rows)}
        assert counts == {manifest["views"][view]["rows"]}, (view, counts)
        for fmt in ("csv", "parquet", "md", "json"):
            assert manifest["files"][f"{view}.{fmt}"]["rows"] == len(json_rows)
        if json_rows:
            assert list(json_rows[0]) == manifest["views"][view]["columns"]
    assert {"README.md", "manifest.json"} <= {p.name for p in export_dir.iterdir()}
    readme = (export_dir / "README.md").read_text(encoding="utf-8")
    assert all(f"({v}.parquet)" in readme for v in expected)


def test_markdown_is_a_report_table(export_dir: Path) -> None:
    text = (export_dir / "rvp_leaderboard.md").read_text(encoding="utf-8")
    caption = text.splitlines()[2]
    assert ": means over scored cases; n_scored/n_cases shown." in caption
    header, rows = _markdown_table(export_dir / "rvp_leaderboard.md")
    assert header[0].startswith("| profile |") and SEPARATOR.match(header[1])
    assert header[1].count("---:") >= 4  # numbers right-aligned
    # judge-run-b never judged wan-sim: its means are NULL, shown as an en dash.
    board = json.loads((export_dir / "rvp_leaderboard.json").read_text(encoding="utf-8"))
    unscored = [i for i, r in enumerate(board) if r["n_scored"] == 0]
    assert unscored and all(board[i]["final_score"] is None for i in unscored)
    assert all(f"| {NULL_MARK} |" in rows[i] for i in unscored)
    for view in ("rvp_leaderboard", "vv_scores", "rvp_metric_means"):
        body = "\n".join(_markdown_table(export_dir / f"{view}.md")[1])
        assert not re.search(r"\d\.\d{5,}", body), view  # at most four decimals
        assert "None" not in body and "nan" not in body
    assert [format_number(x) for x in (0.0714285714, 45.4, 1.0, 0.0, 75.11061, 1.5e-6)] == \
        ["0.0714", "45.4", "1", "0", "75.1106", "1.5e-06"]


def test_markdown_and_charts_show_the_error_bars(export_dir: Path, tmp_path: Path) -> None:
    """`mean ± se` and a `_ci95` column in Markdown, equal to the view's values; error bars on
    the leaderboard chart and bands on the checkpoint curves change the pixels."""
    board = json.loads((export_dir / "rvp_leaderboard.json").read_text(encoding="utf-8"))
    header, rows = _markdown_table(export_dir / "rvp_leaderboard.md")
    names = [c.strip() for c in header[0].strip("|").split("|")]
    assert "final_score_se" not in names and "final_score_ci95" in names
    scored = [(i, r) for i, r in enumerate(board) if r["final_score_se"] is not None]
    assert scored
    for i, r in scored:
        cells = [c.strip() for c in rows[i].strip("|").split("|")]
        assert cells[names.index("final_score")] == (
            f"{format_number(r['final_score'])} ± {format_number(r['final_score_se'])}")
        assert cells[names.index("final_score_ci95")] == (
            f"[{format_number(r['final_score_ci_low'])}, "
            f"{format_number(r['final_score_ci_high'])}]")
    pairs_header, _ = _markdown_table(export_dir / "vv_run_pairs.md")
    assert "accuracy_diff_ci95" in pairs_header[0] and "diff_se" not in pairs_header[0]
    rows_a = [r for r in board if r["judge_run_id"] == scored[0][1]["judge_run_id"]]
    bare = [{k: v for k, v in r.items() if "_ci_" not in k} for r in rows_a]
    chart_leaderboard(rows_a, "t", tmp_path / "with.png")
    chart_leaderboard(bare, "t", tmp_path / "without.png")
    assert (tmp_path / "with.png").read_bytes() != (tmp_path / "without.png").read_bytes()
    scores = json.loads((export_dir / "vv_scores.json").read_text(encoding="utf-8"))
    card = [r for r in scores if r["policy"] == "card"]
    assert any(r["accuracy_ci_low"] is not None for r in card)
    chart_accuracy_by_step(card, tmp_path / "bands.png", "card")
    chart_accuracy_by_step([{k: v for k, v in r.items() if "_ci_" not in k} for r in card],
                           tmp_path / "lines.png", "card")
    assert (tmp_path / "bands.png").read_bytes() != (tmp_path / "lines.png").read_bytes()


def test_manifest(export_dir: Path, demo_warehouse: Settings) -> None:
    m = _manifest(export_dir)
    assert m["stamp"] == STAMP and m["skipped"] == {}
    [current] = m["profiles"]
    assert current["profile"] == "current"
    assert (current["w_pi"], current["w_vr"], current["w_vq"]) == (0.5, 0.4, 0.1)
    assert {w["metric"] for w in current["metric_weights"]} >= {"PI-1", "VR-1"}

    sha = re.compile(r"^[0-9a-f]{64}$")
    rvp = m["inputs"]["rynn_vp"]
    assert "resolved_revision" in rvp and rvp["source"]
    assert sha.match(rvp["sha256sums"]["file_sha256"])
    assert rvp["sha256sums"]["n_files"] > 0
    parquets = m["inputs"]["video_val_parquets"]
    assert len(parquets) == 3 and all(sha.match(p["source_fingerprint"]) for p in parquets)
    assert m["inputs"]["judgment_files"] and m["inputs"]["response_files"]
    assert all(sha.match(f["sha256"]) for f in m["inputs"]["judgment_files"])

    board = _query(demo_warehouse, "SELECT profile, judge_run_id, system, modality, n_scored, "
                                   "n_cases, n_snapshot_cases FROM rvp_leaderboard")
    assert sorted(tuple(d.values()) for d in m["denominators"]["rvp_leaderboard"]) == \
        sorted(board)
    scores = _query(demo_warehouse, "SELECT policy, run_id, step, data_source, n_rows::BIGINT, "
                                    "n_responded::BIGINT FROM vv_scores")
    assert sorted(tuple(d.values()) for d in m["denominators"]["vv_scores"]) == sorted(scores)

    assert set(m["packages"]) == set(PACKAGES)
    assert all(m["packages"][p] for p in ("benchlake", "duckdb", "pyarrow", "matplotlib"))
    policies = {p["policy"]: p for p in m["scoring_policies"]}
    assert set(policies) == {"card", "strict"} and policies["card"]["is_default"]
    assert (policies["card"]["accuracy_weight"], policies["card"]["format_weight"]) == (0.8, 0.2)


def test_charts_are_pngs_and_exports_are_deterministic(export_dir: Path,
                                                       demo_warehouse: Settings,
                                                       tmp_path: Path) -> None:
    charts = _manifest(export_dir)["charts"]
    assert {"charts/rvp_leaderboard_current_judge-run-a.png",
            "charts/rvp_scene_heatmap_current_judge-run-a.png",
            "charts/vv_accuracy_by_step_card.png",
            "charts/vv_accuracy_by_step_strict.png"} <= set(charts)
    for chart in charts:
        with Image.open(export_dir / chart) as image:
            assert image.format == "PNG" and image.width > 0 and image.height > 0
            image.verify()

    again = export_reports(demo_warehouse.home, tmp_path / "again", stamp=STAMP)
    first = sorted(p.relative_to(export_dir) for p in export_dir.rglob("*") if p.is_file())
    second = sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert first == second
    for rel in first:
        if rel.suffix in (".png", ".csv", ".parquet", ".json", ".md"):
            assert (export_dir / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_api_errors(demo_warehouse: Settings, export_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"^unknown profile 'nope'; profiles: current$"):
        export_reports(demo_warehouse.home, tmp_path / "bad", ["nope"])
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ReportError, match="already exists"):
        export_reports(demo_warehouse.home, export_dir.parent, stamp=STAMP)
    with pytest.raises(ReportError, match=r"^cannot write to .*: Not a directory$"):
        (tmp_path / "afile").write_text("")
        export_reports(demo_warehouse.home, tmp_path / "afile" / "sub")
    with pytest.raises(ReportError, match="is empty: run `benchlake materialize` first"):
        export_reports(tmp_path / "nowhere", tmp_path / "out")


def _cli(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHLAKE_HOME": str(home)}
    exe = str(BENCHLAKE) if BENCHLAKE.exists() else shutil.which("benchlake") or "benchlake"
    return subprocess.run([exe, "export", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180, check=False)


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_cli_export(demo_warehouse: Settings, tmp_path: Path) -> None:
    result = _cli(demo_warehouse.home, tmp_path, "--out", str(tmp_path / "out"),
                  "--profile", "current")
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.splitlines()[0])
    assert folder.parent == tmp_path / "out" and (folder / "manifest.json").is_file()
    assert "rvp_leaderboard.{csv,parquet,md,json}" in result.stdout
    board = json.loads((folder / "rvp_leaderboard.json").read_text(encoding="utf-8"))
    assert board and {r["profile"] for r in board} == {"current"}


def test_cli_unknown_profile(demo_warehouse: Settings, tmp_path: Path) -> None:
    line = _one_line_error(_cli(demo_warehouse.home, tmp_path, "--out", str(tmp_path / "out"),
                                "--profile", "nope"))
    assert "unknown profile 'nope'" in line and "current" in line


def test_cli_unwritable_out(demo_warehouse: Settings, tmp_path: Path) -> None:
    # A folder under a regular file cannot be created even by root (chmod is not enforced then).
    (tmp_path / "afile").write_text("not a folder")
    target = tmp_path / "afile" / "sub"
    line = _one_line_error(_cli(demo_warehouse.home, tmp_path, "--out", str(target)))
    assert f"cannot write to {target}" in line


def test_cli_empty_warehouse(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    line = _one_line_error(_cli(home, tmp_path, "--out", str(tmp_path / "out")))
    assert "is empty" in line and "benchlake materialize" in line
    assert not (tmp_path / "out").exists()


# --- the HTML results browser ---------------------------------------------------------------

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C WebDriver element key


def _shown(value: float | None) -> str:
    return score(value)


def test_every_evaluation_and_checkpoint_has_a_page(export_dir: Path,
                                                    demo_warehouse: Settings) -> None:
    con = connect(demo_warehouse.home)
    evaluations = [r[0] for r in con.sql("SELECT evaluation_id FROM rvp_evaluations").fetchall()]
    checkpoints = con.sql("SELECT DISTINCT run_id, step FROM vv_scores").fetchall()
    assert evaluations and checkpoints
    for evaluation in evaluations:
        page = (export_dir / evaluation_page(evaluation)).read_text(encoding="utf-8")
        assert evaluation.partition("/")[2] in page
    for run_id, step in checkpoints:
        assert (export_dir / checkpoint_page(run_id, step)).is_file()
    manifest = json.loads((export_dir / "manifest.json").read_text(encoding="utf-8"))
    assert "index.html" in manifest["files"]
    assert latest_report(export_dir.parent) == export_dir / "index.html"
    # self-contained: every image a page shows is inside the export, by a relative path
    for page in export_dir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for src in text.split('src="')[1:]:
            target = src.split('"', 1)[0]
            assert "://" not in target and not target.startswith("/"), (page, target)
            assert (page.parent / target).resolve().is_file(), (page, target)
    # the question browser: the best checkpoint of a run lists its responses, wrong ones marked
    best = con.execute("SELECT run_id, best_step FROM vv_best_checkpoints WHERE policy = 'card' "
                       "AND run_id = 'base-rl'").fetchone()
    text = (export_dir / checkpoint_page(*best)).read_text(encoding="utf-8")
    n = con.execute("SELECT count(*) FROM vv_scored_responses WHERE policy = 'card' AND "
                "run_id = ? AND step = ?", list(best)).fetchone()[0]
    assert text.count("<tr data-correct=") == n
    assert 'data-correct="false"' in text and 'id="only-none"' in text


def _pages(export_dir: Path) -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in sorted(export_dir.rglob("*.html"))}


_CELL = re.compile(r'<(td|span) class="([^"]*)"[^>]*>(.*?)</\1>', re.S)
_TAG = re.compile(r"<[^>]+>")


def test_number_formats() -> None:
    """One rounding per kind of column, and the patterns the pages are checked against."""
    cases = {"score": [(75.11061, "75.1"), (0.04, "0.0"), (-0.0001, "0.0"), (100, "100.0")],
             "diff": [(16.04489, "+16.0"), (-5.55, "-5.5"), (-0.01, "+0.0")],
             "rate": [(0.5917, "59.2 %"), (1, "100.0 %"), (0.0417, "4.2 %")],
             "rate_diff": [(0.05, "+5.0 pp"), (-0.125, "-12.5 pp")],
             "p": [(0.034, "0.0340"), (0.6, "0.600"), (1.0, "1.00"), (0.0, "0.00"),
                   (1.5e-6, "1.50e-06")],
             "seconds": [(4.679, "4.68 s"), (0, "0.00 s")]}
    for kind, pairs in cases.items():
        for value, shown in pairs:
            assert FILTERS[kind](value) == shown, (kind, value)
            assert PATTERNS[kind].match(shown), (kind, shown)
        assert FILTERS[kind](None) == FILTERS[kind](float("nan")) == NULL_MARK
    assert p_value(0.0342) == "0.0342" and not PATTERNS["score"].match("58.259")
    # the vv_scores macro row of the issue: ± 0.0417 with 0.0698–1: t is large and it is clipped
    assert interval_note("rate", 0.59, 0.0417, 0.0698, 1.0) == \
        "t = 12.5 (few clusters); clipped to 0.0 % – 100.0 %"
    assert interval_note("score", 75.1, 1.0, 73.0, 77.2) is None  # t 2.1: nothing to explain
    assert interval_note("score", 75.1, None, None, None) is None


def test_browser_links_resolve_and_numbers_are_formatted(export_dir: Path,
                                                          available: set[str]) -> None:
    """Every link of every page resolves (a file of the export; an anchor that the target page
    has), no page prints a Python list, and every number cell is written as its kind says."""
    pages = _pages(export_dir)
    ids = {p: set(re.findall(r'\bid="([^"]+)"', t)) for p, t in pages.items()}
    checked = {kind: 0 for kind in PATTERNS}
    for page, text in pages.items():
        assert "['" not in text and "[&#39;" not in text and "&#39;]" not in text, page
        assert ">None<" not in text, page
        for href in re.findall(r'href="([^"]*)"', text):
            assert "://" not in href and not href.startswith("/"), (page, href)
            target, _, anchor = href.partition("#")
            dest = (page.parent / target).resolve() if target else page
            assert dest.is_file(), (page, href)
            if anchor and dest.suffix == ".html":
                assert anchor in ids[dest], (page, href)
        for _, classes, inner in _CELL.findall(text):
            kinds = [k for k in classes.split() if k in PATTERNS]
            if not kinds:
                continue
            [kind] = kinds
            value = _TAG.sub("", inner).replace("†", "").strip()
            parts = value.split(" – ") if "ci" in classes.split() and value != NULL_MARK \
                else [value]
            for part in parts:
                assert part == NULL_MARK or PATTERNS[kind].match(part), (page, kind, value)
                checked[kind] += 1
    assert all(checked[k] for k in ("score", "diff", "rate", "p", "seconds")), checked
    # the index links the export's own files: README, manifest, every table, every chart
    index = pages[export_dir / "index.html"]
    hrefs = set(re.findall(r'href="([^"#]+)"', index))
    tables = [v.name for v in report_views() if v.name in available]
    assert {"README.md", "manifest.json"} <= hrefs
    assert {f"{v}.{fmt}" for v in tables for fmt in ("csv", "parquet", "md", "json")} <= hrefs
    charts = _manifest(export_dir)["charts"]
    assert any("rvp_scene_heatmap_" in c for c in charts) and set(charts) <= hrefs
    assert {c for c in charts if "heatmap" in c} <= set(re.findall(r'src="([^"]+)"', index))


def test_intervals_are_explained_and_charts_are_drawn_at_their_size(export_dir: Path) -> None:
    """A row whose interval is wider than ± 2.5 SE or clipped carries a † that links to the
    page's footnote on the interval method; the checkpoint curves are drawn no wider than the
    pages show them."""
    scores = json.loads((export_dir / "vv_scores.json").read_text(encoding="utf-8"))
    marked = [r for r in scores if interval_note("rate", r["accuracy"], r["accuracy_se"],
                                                 r["accuracy_ci_low"], r["accuracy_ci_high"])]
    assert any(r["data_source"] == "macro" for r in marked)
    for run_id, step in sorted({(r["run_id"], r["step"]) for r in scores}):
        text = (export_dir / checkpoint_page(run_id, step)).read_text(encoding="utf-8")
        mine = [r for r in marked if (r["run_id"], r["step"]) == (run_id, step)]
        assert text.count('href="#interval-note"') == len(mine), (run_id, step)
        assert 'id="interval-note"' in text and "t(0.975, df)" in text
    for chart in _manifest(export_dir)["charts"]:
        with Image.open(export_dir / chart) as image:
            assert image.width <= CHART_WIDTH_IN * 100, (chart, image.size)
    with Image.open(export_dir / "charts/vv_accuracy_by_step_card.png") as image:
        assert image.width == CHART_WIDTH_IN * 100


def test_checkpoint_pages_link_the_question_browsers(export_dir: Path,
                                                     demo_warehouse: Settings) -> None:
    """A checkpoint page without a question browser links its run's best and last checkpoints,
    whose pages have one."""
    con = connect(demo_warehouse.home)
    best = dict(con.execute("SELECT run_id, best_step FROM vv_best_checkpoints "
                            "WHERE policy = 'card'").fetchall())
    last = dict(con.execute("SELECT run_id, max(step) FROM vv_scores GROUP BY run_id").fetchall())
    others = con.execute("SELECT DISTINCT run_id, step FROM vv_scores ORDER BY ALL").fetchall()
    others = [(r, s) for r, s in others if s not in (best.get(r), last[r])]
    assert others
    for run_id, step in others:
        page = export_dir / checkpoint_page(run_id, step)
        text = page.read_text(encoding="utf-8")
        links = re.findall(r'<a class="browsed" href="([^"]+)"', text)
        want = {checkpoint_page(run_id, s) for s in (best.get(run_id), last[run_id])
                if s is not None}
        assert {str((page.parent / h).resolve().relative_to(export_dir.resolve()))
                for h in links} == want, (run_id, step)
        for target in want:
            assert "<tr data-correct=" in (export_dir / target).read_text(encoding="utf-8")


def test_side_by_side_pages(export_dir: Path, demo_warehouse: Settings) -> None:
    """Each system and the one ranked just below it (per leaderboard shown) get one page per case
    both have an evaluation of, with both storyboards and the views' scores and differences;
    the pairs list on the index and the evaluation pages link there."""
    con = connect(demo_warehouse.home)
    board = con.execute("SELECT profile, judge_run_id, modality, rank_in_modality, system "
                        "FROM rvp_leaderboard WHERE rank_in_modality IS NOT NULL ORDER BY "
                        "profile, judge_run_id, modality, rank_in_modality, system").fetchall()
    pairs: list[tuple[str, str]] = []
    for (*on, _, upper), (*on2, _, lower) in zip(board, board[1:], strict=False):
        if on == on2 and (lower, upper) not in pairs and (upper, lower) not in pairs:
            pairs.append((upper, lower))
    assert pairs  # the demo: veo-sim above wan-sim
    evaluations = {tuple(r) for r in con.execute(
        "SELECT system, case_id FROM rvp_evaluations").fetchall()}
    cases = sorted({c for _, c in evaluations})
    expected = {side_by_side_page(a, b, c) for a, b in pairs for c in cases
                if (a, c) in evaluations and (b, c) in evaluations}
    found = {str(p.relative_to(export_dir)) for p in (export_dir / "rvp" / "compare").rglob(
        "*.html")}
    assert found == expected
    systems = {s for *_, s in board}
    assert len(found) <= (len(systems) - 1) * len(cases)
    index = (export_dir / "index.html").read_text(encoding="utf-8")
    for a, b in pairs:
        for case_id in cases:
            rel = side_by_side_page(a, b, case_id)
            if rel not in expected:
                continue
            text = (export_dir / rel).read_text(encoding="utf-8")
            n_boards = con.execute("SELECT count(*) FROM rvp_storyboards WHERE evaluation_id "
                                   "IN (?, ?)", [f"{a}/{case_id}", f"{b}/{case_id}"]).fetchone()
            assert text.count('class="board storyboard"') == n_boards[0]
            for side in (a, b):
                evaluation = (export_dir / evaluation_page(f"{side}/{case_id}")).read_text(
                    encoding="utf-8")
                assert Path(rel).name in evaluation and f"with {b if side == a else a}" in \
                    evaluation
            want = con.execute("SELECT judge_run_id, final_score, base_final_score, "
                               "final_score_diff FROM rvp_case_diffs WHERE profile = 'current' "
                               "AND system = ? AND base_system = ? AND case_id = ?",
                               [a, b, case_id]).fetchall()
            for run, mine, base, diff in want:
                row = re.search(rf'<tr data-profile="current" data-judge-run="{run}">(.*?)</tr>',
                                text, re.S).group(1)
                assert [_TAG.sub("", c) for c in re.findall(
                    r'<td class="num (?:score final-score|diff final-diff)">(.*?)</td>', row)] \
                    == [score(mine), score(base), FILTERS["diff"](diff)]
                assert f'href="{rel}"' in index
    # the demo's planted hallucination is wan-sim's alone on its case
    [(case_id, only)] = con.execute(
        "SELECT case_id, base_hallucinations_only FROM rvp_case_diffs WHERE profile = 'current' "
        "AND system = 'veo-sim' AND base_system = 'wan-sim' "
        "AND base_hallucinations_only <> []").fetchall()
    text = (export_dir / side_by_side_page("veo-sim", "wan-sim", case_id)).read_text(
        encoding="utf-8")
    assert "; ".join(only) in text


def test_compare_pages_link_every_question_to_its_page(export_dir: Path,
                                                      demo_warehouse: Settings) -> None:
    """The index lists the compare pages; each has one row per question either checkpoint
    answered, its filters, and links that all resolve: every question to its page, which shows a
    strip per run and links back."""
    con = connect(demo_warehouse.home)
    index = (export_dir / "index.html").read_text(encoding="utf-8")
    compares = sorted(set(re.findall(r'href="(vv/compare/[^"]+)"', index)))
    best = dict(con.execute("SELECT run_id, best_step FROM vv_best_checkpoints "
                            "WHERE policy = 'card'").fetchall())
    last = dict(con.execute("SELECT run_id, max(step) FROM vv_scores GROUP BY run_id").fetchall())
    assert compare_page("base-rl", last["base-rl"], "base-rl", best["base-rl"]) in compares
    assert len(compares) <= (LAST_STEPS + 3) * len(best)
    questions: set[str] = set()
    for rel in compares:
        page = export_dir / rel
        text = page.read_text(encoding="utf-8")
        run, step, base_run, base_step = re.search(
            r"<h1>(\S+) step (\d+) <span class=\"muted\">vs</span> (\S+) step (\d+)</h1>",
            text).groups()
        answered = con.execute(
            "SELECT count(DISTINCT uid) FROM vv_question_history WHERE policy = 'card' AND "
            "((run_id = ? AND step = ?) OR (run_id = ? AND step = ?))",
            [run, int(step), base_run, int(base_step)]).fetchone()[0]
        assert text.count("<tr data-uid=") == answered > 0
        for box in ("only-flips", "only-wrong", "only-failed", 'id="category"'):
            assert box in text
        for href in re.findall(r'href="([^"#]+)"', text):
            assert (page.parent / href).resolve().is_file(), (rel, href)
        questions |= {h for h in re.findall(r'href="([^"]+/vv/questions/[^"]+)"', text)}
    assert len(questions) == con.execute(
        "SELECT count(DISTINCT uid) FROM vv_question_history").fetchone()[0]
    page = export_dir / question_page("videomme_v1_test:3")
    text = page.read_text(encoding="utf-8")
    runs = con.execute("SELECT count(DISTINCT run_id) FROM vv_question_history "
                       "WHERE uid = 'videomme_v1_test:3'").fetchone()[0]
    assert text.count('<td class="strip">') == runs
    for href in re.findall(r'href="([^"#]+)"', text):
        assert (page.parent / href).resolve().is_file(), href


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Browser:
    """A headless Chromium session through chromedriver's HTTP API."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        options = {"binary": shutil.which("chromium") or "/usr/bin/chromium",
                   "args": ["--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-background-networking", "--disable-dev-shm-usage",
                            "--allow-file-access-from-files"]}
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome",
                                                 "goog:chromeOptions": options}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())["value"]

    def go(self, url: str) -> None:
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def js(self, script: str) -> Any:
        return self._call("POST", f"/session/{self.session}/execute/sync",
                          {"script": script, "args": []})

    def click(self, css: str) -> None:
        found = self._call("POST", f"/session/{self.session}/element",
                           {"using": "css selector", "value": css})
        self._call("POST", f"/session/{self.session}/element/{found[ELEMENT]}/click", {})

    def url(self) -> str:
        return self._call("GET", f"/session/{self.session}/url")

    def close(self) -> None:
        self._call("DELETE", f"/session/{self.session}")


@pytest.fixture
def browser() -> Iterator[_Browser]:
    driver = shutil.which("chromedriver")
    if driver is None or shutil.which("chromium") is None:
        # .ci/run installs them: in CI their absence is a failure, never a skip
        (pytest.fail if in_ci() else pytest.skip)("chromium and chromedriver are not installed")
    port = _free_port()
    proc = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        b = _Browser(port)
        try:
            yield b
        finally:
            b.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_from_the_leaderboard_to_an_evaluation_in_chromium(export_dir: Path, browser: _Browser,
                                                           demo_warehouse: Settings) -> None:
    con = connect(demo_warehouse.home)
    profile, run, system = con.execute(
        "SELECT profile, judge_run_id, system FROM rvp_leaderboard WHERE modality = 'video' "
        "AND n_scored > 0 ORDER BY final_score DESC LIMIT 1").fetchone()
    browser.go((export_dir / "index.html").as_uri())
    # the leaderboard shows the view's numbers
    board = browser.js(f"""
        var t = document.querySelector('table.leaderboard[data-profile="{profile}"]'
                                       + '[data-judge-run="{run}"]');
        return Array.from(t.tBodies[0].rows).map(function (r) {{
            return [r.dataset.system, r.querySelector('td.final-score').textContent]; }});""")
    want = dict(con.execute("SELECT system, final_score FROM rvp_leaderboard WHERE profile = ? "
                        "AND judge_run_id = ?", [profile, run]).fetchall())
    assert {s: v.strip() for s, v in board} == {s: _shown(v) for s, v in want.items()}
    # click the system, then its first scored case, as a user would
    row = f'table.leaderboard[data-judge-run="{run}"] tr[data-system="{system}"] a'
    browser.click(row)
    anchor = browser.url().rpartition("#")[2]
    browser.js(f"document.getElementById('{anchor}').open = true;")
    browser.click(f"details#{anchor} table.cases tbody tr:first-child a")
    assert "/rvp/" in browser.url()
    case_id = Path(browser.url()).stem
    for _ in range(50):  # wait until every image has loaded or failed
        if browser.js("return Array.from(document.images).every(i => i.complete);"):
            break
        time.sleep(0.1)
    boards = browser.js("return Array.from(document.querySelectorAll('img.storyboard'))"
                        ".map(i => [i.complete, i.naturalWidth]);")
    assert len(boards) == 5 and all(done and width > 0 for done, width in boards), boards
    shown = browser.js("""return Array.from(document.querySelectorAll('table.scores tbody tr'))
        .map(r => [r.dataset.profile, r.dataset.judgeRun,
                   r.querySelector('td.final-score').textContent]);""")
    want = con.execute("SELECT profile, judge_run_id, final_score FROM rvp_candidate_scores "
                   "WHERE system = ? AND case_id = ?", [system, case_id]).fetchall()
    assert sorted((p, r, v.strip()) for p, r, v in shown) == sorted(
        (p, r, _shown(v)) for p, r, v in want)
