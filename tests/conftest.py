"""Shared fixtures: the demo inputs and one demo warehouse for the whole session (both xdist
workers share them: the first to ask builds, under a lock), and copies of the demo to break on
purpose."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

from benchlake_demo import ensure_demo
from dagster_project.settings import Settings
from dagster_project.warehouse.project import locked, prepare_manifest

warnings.filterwarnings("ignore", module="dagster")

# The Rynn-VP ingestion assets only (no candidates/evidence): what the ingest tests need.
RVP_INGEST = " or ".join(f"key:raw_{k}" for k in (
    "rvp_snapshot", "rvp_checksums", "rvp_media", "rvp_cases", "rvp_intervals"))

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def pytest_configure(config: pytest.Config) -> None:
    # The definitions are built from the dbt manifest: parse sql/ once if it changed (a lock
    # keeps the two workers from parsing at once).
    prepare_manifest()


def settings_for(home: Path, **overrides: str) -> Settings:
    env = {"BENCHLAKE_HOME": str(home)}
    env.update({Settings.env_name(k): v for k, v in overrides.items()})
    return Settings.from_env(env)


def _shared(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every xdist worker of this session sees (beside the workers' own temp roots)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return root / name


@pytest.fixture(scope="session")
def demo_inputs(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Demo inputs built once per session; tests copy from here instead of regenerating videos."""
    home = _shared(tmp_path_factory, "demo-inputs")
    with locked(home.parent / "demo-inputs.lock"):
        settings = settings_for(home)
        ensure_demo(settings)
    return settings


@pytest.fixture(scope="session")
def demo_warehouse(demo_inputs: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A warehouse with every asset but the exports materialized from the demo and every check
    run, by `benchlake materialize`'s own path, once per session (read-only for tests)."""
    from dagster_project.runner import materialize

    home = _shared(tmp_path_factory, "demo-warehouse")
    with locked(home.parent / "demo-warehouse.lock"):
        settings = settings_for(home)
        if not (home / ".built").exists():
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(demo_inputs.demo_dir, home / "demo")
            result = materialize(settings)
            assert result.success, [f.message for f in result.failures()]
            (home / ".built").touch()
    return settings


@pytest.fixture(scope="session")
def demo_tables(demo_inputs: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A warehouse with every asset but the exports materialized from the demo, views included,
    without running any check (`materialize(checks=False)`), once per session (read-only for
    tests; copy it to change it): for the tests of tables and of what a rerun does."""
    from dagster_project.runner import materialize

    home = _shared(tmp_path_factory, "demo-tables")
    with locked(home.parent / "demo-tables.lock"):
        settings = settings_for(home)
        if not (home / ".built").exists():
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(demo_inputs.demo_dir, home / "demo")
            result = materialize(settings, checks=False)
            assert result.success, [f.message for f in result.failures()]
            (home / ".built").touch()
    return settings


def copy_home(settings: Settings, dest: Path, **overrides: str) -> Settings:
    """A private, writable copy of a warehouse (without its Dagster history)."""
    shutil.copytree(settings.home, dest, ignore=shutil.ignore_patterns("dagster", ".built"))
    return settings_for(dest, **overrides)


@pytest.fixture
def rynn_vp_copy(demo_inputs: Settings, tmp_path: Path) -> Path:
    """A private, writable copy of the demo Rynn-VP snapshot."""
    dest = tmp_path / "Rynn-VP"
    shutil.copytree(Path(demo_inputs.rynn_vp_source_or_demo()), dest)
    return dest
