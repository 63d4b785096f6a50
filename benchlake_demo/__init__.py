"""Deterministic embedded demo inputs, built on demand under `$BENCHLAKE_HOME/demo/`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from dagster_project.settings import Settings

# Bump when the generator's output changes: an older demo folder is then rebuilt.
DEMO_VERSION = "4"


def _build_once(target: Path, build: Callable[[Path], Path]) -> Path:
    """Build into a temp folder beside `target`, then rename: never a half-written demo."""
    stamp = target.parent / f".{target.name}.version"
    if target.is_dir() and stamp.is_file() and stamp.read_text() == DEMO_VERSION:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp / target.name)
        if target.exists():
            shutil.rmtree(target)
        (tmp / target.name).rename(target)
        stamp.write_text(DEMO_VERSION)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def ensure_rynn_vp_demo(settings: Settings) -> None:
    """Build the demo Rynn-VP snapshot if RYNN_VP_SOURCE is left at its default."""
    if settings.uses_demo_rynn_vp():
        from benchlake_demo.rynn_vp import build_rynn_vp_demo

        _build_once(Path(settings.rynn_vp_source_or_demo()), build_rynn_vp_demo)


def ensure_video_val_demo(settings: Settings) -> None:
    """Build the demo val parquets and videos if VIDEO_VAL_SOURCE is left at its default."""
    if settings.uses_demo_video_val():
        from benchlake_demo.video_val import build_video_val_demo

        _build_once(settings.video_val_demo_dir, build_video_val_demo)


def ensure_candidates_demo(settings: Settings) -> None:
    """Build the demo candidates if CANDIDATES_DIR is left at its default."""
    if settings.uses_demo_candidates():
        from benchlake_demo.rvp_candidates import build_candidates_demo

        _build_once(settings.candidates_root(), build_candidates_demo)


def ensure_judgments_demo(settings: Settings) -> None:
    """Build the demo judge runs if JUDGMENTS_DIR is left at its default. They cite the demo
    snapshot's files and the demo candidates' evidence, so those demos are built first."""
    if settings.uses_demo_judgments():
        from benchlake_demo.rvp_judgments import build_judgments_demo

        ensure_rynn_vp_demo(settings)
        ensure_candidates_demo(settings)
        _build_once(settings.judgments_root(), lambda dest: build_judgments_demo(
            dest, Path(settings.rynn_vp_source_or_demo()),
            settings.candidates_root()))


def ensure_responses_demo(settings: Settings) -> None:
    """Build the demo val-suite responses if RESPONSES_DIR is left at its default."""
    if settings.uses_demo_responses():
        from benchlake_demo.vv_responses import build_responses_demo

        _build_once(settings.responses_root(), build_responses_demo)


def ensure_demo(settings: Settings) -> None:
    """Build every demo input that a setting left at its default and that is missing."""
    ensure_rynn_vp_demo(settings)
    ensure_video_val_demo(settings)
    ensure_candidates_demo(settings)
    ensure_judgments_demo(settings)
    ensure_responses_demo(settings)
