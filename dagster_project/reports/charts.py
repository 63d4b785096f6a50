"""PNG charts of the report views (matplotlib, Agg canvas): the Rynn-VP leaderboard and scene
heatmap per profile and judge run, and val-suite accuracy by step per scoring policy. Fixed size,
dpi and no timestamps, so the same rows give the same bytes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster_project.reports.markdown import NULL_MARK
from dagster_project.tables import atomic_write_bytes

if TYPE_CHECKING:
    from dagster_project.reports.export import _ViewExport

# Fixed chart geometry: the same data always gives the same pixels. Charts are drawn at most
# as wide as the pages show them (CSS max-width 100 % of a ~900 px column), never scaled down.
_DPI = 100
CHART_WIDTH_IN = 9.0
_MODALITY_COLORS = {"video": "#4C72B0", "images": "#DD8452"}
_FALLBACK_COLORS = ("#55A868", "#C44E52", "#8172B3", "#937860")


def safe_name(name: str) -> str:
    """`name` as one file-name component (charts, report pages, media)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "_"


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # Figure + Agg canvas directly: no pyplot global state, no backend switch for the caller.
    fig = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    # No "Software" tag (matplotlib's version) and no timestamp: identical bytes per run.
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    atomic_write_bytes(path, buf.getvalue())


def _modality_color(modality: str | None, seen: dict[str, str]) -> str:
    key = modality or "unknown"
    if key not in seen:
        seen[key] = _MODALITY_COLORS.get(key, _FALLBACK_COLORS[len(seen) % len(_FALLBACK_COLORS)])
    return seen[key]


def chart_leaderboard(rows: Sequence[dict[str, Any]], title: str, path: Path) -> None:
    """Horizontal bars of final_score per system, grouped and colored by modality, each bar
    labelled with its n_scored/n_cases (a mean is only as good as its denominator), with its 95 %
    interval as an error bar where the view has one."""
    rows = sorted(rows, key=lambda r: (r.get("modality") or "", r.get("rank_in_modality") or 1e9,
                                       r["system"]))
    fig = _figure(8.0, 1.2 + 0.5 * len(rows))
    ax = fig.add_subplot()
    colors: dict[str, str] = {}
    labels = [f"{r['system']} ({r.get('modality') or '?'})" for r in rows]
    scores = [r["final_score"] if r["final_score"] is not None else 0.0 for r in rows]
    ys = list(range(len(rows)))[::-1]  # first row on top
    ax.barh(ys, scores, color=[_modality_color(r.get("modality"), colors) for r in rows],
            height=0.6)
    ends = list(scores)  # where a bar's label goes: past its error bar
    for i, (y, r, score) in enumerate(zip(ys, rows, scores, strict=True)):
        low, high = r.get("final_score_ci_low"), r.get("final_score_ci_high")
        if r["final_score"] is not None and low is not None and high is not None:
            ax.errorbar([score], [y], xerr=[[score - low], [high - score]], fmt="none",
                        ecolor="black", elinewidth=1.2, capsize=4)
            ends[i] = high
    for y, r, score, end in zip(ys, rows, scores, ends, strict=True):
        denominator = f"{r['n_scored']}/{r['n_cases']}"
        value = NULL_MARK if r["final_score"] is None else f"{r['final_score']:.2f}"
        if score >= 12:  # room inside the bar for the denominator
            ax.text(1.5, y, denominator, va="center", ha="left", color="white", fontsize=9,
                    fontweight="bold")
        else:  # a short (or absent) bar: both labels beside it, still readable
            value = f"{value}   {denominator}"
        ax.text(min(end, 88.0) + 1.0, y, value, va="center", ha="left", fontsize=9)
    ax.set_yticks(ys, labels)
    ax.set_xlim(0, 100)
    ax.set_xlabel("final_score (mean over scored cases, 95 % interval; bar label: "
                  "n_scored/n_cases)")
    ax.set_title(title, fontsize=11)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=c, label=m) for m, c in colors.items()], loc="lower right",
              fontsize=8, title="modality", title_fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def chart_scene_heatmap(rows: Sequence[dict[str, Any]], title: str, path: Path) -> None:
    """System × scene heatmap of final_score with the values written in (blank: no score)."""
    import numpy as np

    systems = sorted({(r.get("modality") or "", r["system"]) for r in rows})
    scenes = sorted({r["scene"] for r in rows if r["scene"] is not None})
    grid = np.full((len(systems), len(scenes)), np.nan)
    for r in rows:
        if r["final_score"] is not None and r["scene"] is not None:
            key = (r.get("modality") or "", r["system"])
            grid[systems.index(key), scenes.index(r["scene"])] = r["final_score"]
    fig = _figure(min(CHART_WIDTH_IN, 1.6 + 1.3 * max(len(scenes), 1)),
                  1.6 + 0.55 * max(len(systems), 1))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0, vmax=100,
                      aspect="auto")
    for i in range(len(systems)):
        for j in range(len(scenes)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=9,
                        color="black" if grid[i, j] > 60 else "white")
    ax.set_xticks(range(len(scenes)), scenes, rotation=30, ha="right")
    ax.set_yticks(range(len(systems)), [f"{s} ({m or '?'})" for m, s in systems])
    ax.set_title(title, fontsize=11)
    fig.colorbar(image, ax=ax, label="final_score")
    fig.tight_layout()
    _save(fig, path)


def chart_accuracy_by_step(rows: Sequence[dict[str, Any]], path: Path, policy: str) -> None:
    """Val accuracy against step under one scoring policy: one panel per data_source ('all'
    first), two panels a row, one line per run, its 95 % interval as a band. Drawn at the width
    the pages show it (CHART_WIDTH_IN), so its ticks are read at their size, with the runs'
    legend below the panels, never over a point."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    sources = sorted({r["data_source"] for r in rows} - {"all", "macro"})
    panels = (["all"] if any(r["data_source"] == "all" for r in rows) else []) + sources
    runs = sorted({r["run_id"] for r in rows})
    # one color per run in every panel (the axes' own cycle would skip runs a panel lacks)
    colors = {run: f"C{i % 10}" for i, run in enumerate(runs)}
    ncols = min(2, max(len(panels), 1))
    nrows = -(-max(len(panels), 1) // ncols)
    legend_rows = -(-len(runs) // 3)
    fig = _figure(CHART_WIDTH_IN, 0.7 + 2.6 * nrows + 0.25 * legend_rows)
    fig.set_layout_engine("constrained")
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    for ax, source in zip(axes, panels, strict=False):
        for run in runs:
            points = sorted((r["step"], r["accuracy"], r.get("accuracy_ci_low"),
                             r.get("accuracy_ci_high")) for r in rows
                            if r["run_id"] == run and r["data_source"] == source
                            and r["accuracy"] is not None)
            if points:
                [line] = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                                 label=run, color=colors[run])
                band = [p for p in points if p[2] is not None and p[3] is not None]
                if band:
                    ax.fill_between([p[0] for p in band], [p[2] for p in band],
                                    [p[3] for p in band], color=line.get_color(), alpha=0.15,
                                    linewidth=0)
        ax.set_title(source, fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1)
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    for ax in axes[::ncols]:
        ax.set_ylabel("accuracy")
    fig.legend(handles=[Line2D([], [], color=colors[r], marker="o", label=r) for r in runs],
               loc="outside lower center", ncols=min(3, max(len(runs), 1)), fontsize=9,
               title="run", title_fontsize=9)
    fig.suptitle(f"videorl-video-val accuracy by step — scoring policy {policy} (bands: 95 % "
                 "intervals)", fontsize=11)
    _save(fig, path)


def _write_charts(exports: dict[str, _ViewExport], profiles: Sequence[str],
                  charts_dir: Path) -> list[str]:
    written: list[Path] = []
    board = exports.get("rvp_leaderboard")
    scenes = exports.get("rvp_by_scene")
    for profile in profiles:
        if board is not None:
            for run in sorted({r["judge_run_id"] for r in board.rows if r["profile"] == profile}):
                rows = [r for r in board.rows
                        if r["profile"] == profile and r["judge_run_id"] == run]
                path = charts_dir / f"rvp_leaderboard_{safe_name(profile)}_{safe_name(run)}.png"
                chart_leaderboard(rows, f"Rynn-VP leaderboard — profile {profile}, {run}", path)
                written.append(path)
        if scenes is not None:
            for run in sorted({r["judge_run_id"] for r in scenes.rows
                               if r["profile"] == profile}):
                rows = [r for r in scenes.rows
                        if r["profile"] == profile and r["judge_run_id"] == run]
                path = charts_dir / f"rvp_scene_heatmap_{safe_name(profile)}_{safe_name(run)}.png"
                chart_scene_heatmap(rows, f"Rynn-VP final_score by scene — profile {profile}, "
                                          f"{run}", path)
                written.append(path)
    scores = exports.get("vv_scores")
    if scores is not None and scores.rows:
        for policy in sorted({r["policy"] for r in scores.rows}):
            path = charts_dir / f"vv_accuracy_by_step_{safe_name(policy)}.png"
            chart_accuracy_by_step([r for r in scores.rows if r["policy"] == policy], path,
                                   policy)
            written.append(path)
    return [f"charts/{p.name}" for p in written]
