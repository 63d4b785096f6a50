"""Same inputs, same bytes: across fresh processes, build orders and warehouse locations.

Two fresh processes each build every demo input (in two different orders) into a new home and
materialize every asset there (the checks aside). Every file they write must be identical between
the two homes and to the demo this pytest process built earlier (after other work, so with a
different memory state); materializing again changes no byte; and a home moved elsewhere works
again once its views are rebuilt there, since stored paths are home-relative.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import settings_for

pytestmark = pytest.mark.slow

BUILD_AND_MATERIALIZE = """
import sys
import benchlake_demo as demo
from dagster_project.runner import materialize
from dagster_project.settings import Settings

settings = Settings.from_env({"BENCHLAKE_HOME": sys.argv[1]})
for name in sys.argv[2].split(","):
    getattr(demo, f"ensure_{name}_demo")(settings)
assert materialize(settings, checks=False).success
"""
ORDERS = {
    "a": "rynn_vp,candidates,judgments,video_val,responses",
    "b": "responses,video_val,candidates,rynn_vp,judgments",
}
# Everything a materialization writes except the catalog and dbt's working copy (views with
# absolute Parquet paths, by design), the Dagster instance (run history), the run markers, the
# logs and the file-identity cache (absolute paths and stat identities, by design); the parts
# kept under cache/ are named and written alike.
COMPARED = ("demo", "tables", "evidence", "frames", "packets", "archive",
            "cache/judgment_parts", "cache/packet_parts")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fresh_homes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("fresh-homes")
    env = {k: v for k, v in os.environ.items() if not k.startswith(
        ("BENCHLAKE_", "RYNN_VP_", "VIDEO_VAL_", "CANDIDATES_", "JUDGMENTS_", "RESPONSES_"))}
    homes = {name: base / f"home-{name}" for name in ORDERS}
    procs = {name: subprocess.Popen(  # both at once: two fresh processes, two orders
        [sys.executable, "-c", BUILD_AND_MATERIALIZE, str(home), ORDERS[name]],
        cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for name, home in homes.items()}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"home {name}:\n{out[-3000:]}"
    return homes


def test_demo_inputs_identical_across_processes_and_orders(fresh_homes, demo_inputs) -> None:
    a, b = (_files(fresh_homes[n] / "demo") for n in ("a", "b"))
    ours = _files(demo_inputs.demo_dir)  # built inside this pytest process, before other tests
    assert sorted(a) == sorted(b) == sorted(ours)
    kinds = {Path(name).suffix for name in a}
    assert {".mp4", ".png", ".json", ".jsonl", ".parquet", ".txt"} <= kinds
    assert any(name.endswith("SHA256SUMS.txt") for name in a)
    differ = [name for name in a if not a[name] == b[name] == ours[name]]
    assert differ == []


def test_two_fresh_homes_write_identical_bytes(fresh_homes) -> None:
    for folder in COMPARED:
        a, b = (_files(fresh_homes[n] / folder) for n in ("a", "b"))
        assert a, folder
        assert sorted(a) == sorted(b), folder
        assert [name for name in a if a[name] != b[name]] == [], folder
    parquet = [n for n in _files(fresh_homes["a"] / "tables") if n.endswith(".parquet")]
    assert len(parquet) > 50
    # No stored value names either home: paths inside it are stored relative to it.
    for home in fresh_homes.values():
        for name in parquet:
            assert str(home).encode() not in (home / "tables" / name).read_bytes(), name


def test_materializing_again_changes_no_byte(fresh_homes) -> None:
    from dagster_project.runner import materialize

    home = fresh_homes["a"]
    before = {f: _files(home / f) for f in COMPARED}
    assert materialize(settings_for(home), checks=False).success
    assert {f: _files(home / f) for f in COMPARED} == before


def test_moved_home_resolves_once_its_views_are_rebuilt(fresh_homes, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(fresh_homes["b"], moved)
    env = {**os.environ, "BENCHLAKE_HOME": str(moved)}
    for var in ("RYNN_VP_SOURCE", "VIDEO_VAL_SOURCE", "CANDIDATES_DIR", "JUDGMENTS_DIR",
                "RESPONSES_DIR", "VIDEO_VAL_PREFIX_MAP"):
        env.pop(var, None)
    query = """SELECT image_abspath AS p FROM rvp_evidence_frames
               UNION ALL SELECT image_abspath FROM rvp_storyboards
               UNION ALL SELECT video_abspath FROM vv_questions
               UNION ALL SELECT packet_abspath FROM rvp_judge_packets"""
    cli = [sys.executable, "-m", "dagster_project.cli"]
    # The catalog's views read where the home was: said, never served.
    stale = subprocess.run([*cli, "sql", query], env=env, capture_output=True, text=True)
    assert stale.returncode != 0 and "was built for" in stale.stderr, stale.stderr
    # Any materialization here rebuilds every view over the moved home's tables.
    subprocess.run([*cli, "materialize", "--select", "key:raw_rvp_snapshot"], env=env,
                   capture_output=True, text=True, check=True)
    out = subprocess.run([*cli, "sql", query, "--format", "json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    paths = [row["p"] for row in json.loads(out)]
    assert len(paths) > 500
    assert all(p.startswith(f"{moved}/") and Path(p).is_file() for p in paths)
    settings = settings_for(moved)
    from dagster_project.defs.resources import BenchlakeSettings

    snapshot = BenchlakeSettings.from_settings(settings).read("rvp_snapshot").to_pylist()[0]
    assert snapshot["local_path"] == str(moved / "demo" / "Rynn-VP")
