"""Shared fixtures: one demo warehouse per session, and copies of the demo to break on purpose."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from benchlake_demo import ensure_demo
from dagster_project.settings import Settings

warnings.filterwarnings("ignore", module="dagster")

# The Rynn-VP ingestion assets only (no candidates/evidence): what the ingest tests need.
RVP_INGEST = " or ".join(f"key:raw_{k}" for k in (
    "rvp_snapshot", "rvp_checksums", "rvp_media", "rvp_cases", "rvp_intervals"))

# Every table (the Python assets), without `dbt build`: the views come from the compiled dbt SQL
# when read (`warehouse.views.connect`), so tests of tables and scores need no dbt run. The dbt
# models themselves are built and checked by tests/defs, tests/cli and tests/warehouse.
TABLES = "not kind:dbt and not group:reports"

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def settings_for(home: Path, **overrides: str) -> Settings:
    env = {"BENCHLAKE_HOME": str(home)}
    env.update({Settings.env_name(k): v for k, v in overrides.items()})
    return Settings.from_env(env)


@pytest.fixture(scope="session")
def demo_inputs(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Demo inputs built once; tests copy from here instead of regenerating videos."""
    settings = settings_for(tmp_path_factory.mktemp("demo-inputs"))
    ensure_demo(settings)
    return settings


@pytest.fixture(scope="session")
def demo_warehouse(demo_inputs: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A warehouse with every asset materialized from the demo (read-only for tests)."""
    from dagster_project.runner import materialize

    home = tmp_path_factory.mktemp("demo-warehouse")
    shutil.copytree(demo_inputs.demo_dir, home / "demo")
    settings = settings_for(home)
    result = materialize(settings, TABLES)
    assert result.success
    return settings


@pytest.fixture
def rynn_vp_copy(demo_inputs: Settings, tmp_path: Path) -> Path:
    """A private, writable copy of the demo Rynn-VP snapshot."""
    dest = tmp_path / "Rynn-VP"
    shutil.copytree(Path(demo_inputs.rynn_vp_source_or_demo()), dest)
    return dest
