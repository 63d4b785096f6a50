"""A val materialization with nothing changed reads the parquets and probes the videos not again:
vv_questions, vv_videos and vv_frame_plan find their inputs as when they last wrote their tables
and describe them as then; a video that disappears, or a parquet rewritten, makes them work."""

from __future__ import annotations

import shutil

import pyarrow.parquet as pq
import pytest

from dagster_project.runner import materialize
from dagster_project.tables import table_path
from tests.conftest import copy_home, table_identities

STEPS = ("vv_questions", "vv_videos", "vv_frame_plan")
SELECT = " or ".join(f"key:raw_vv_{t}" for t in ("source", *[s[3:] for s in STEPS]))


def _rows(outcome, name: str) -> int:
    [event] = [e for e in outcome.get_asset_materialization_events()
               if e.asset_key.to_user_string() == f"raw_{name}"]
    return event.materialization.metadata["dagster/row_count"].value


@pytest.mark.slow
def test_unchanged_val_inputs_are_not_read_again_and_a_change_is(demo_warehouse, tmp_path):
    parquets = tmp_path / "parquets"
    shutil.copytree(demo_warehouse.video_val_source_or_demo(), parquets)
    videos = tmp_path / "videos"
    shutil.copytree(demo_warehouse.video_val_demo_dir / "cache", videos)
    cache = (demo_warehouse.video_val_demo_dir / "cache").resolve()
    prefix = demo_warehouse.video_val_prefix_map_or_demo().replace(cache.as_uri(), videos.as_uri())
    settings = copy_home(demo_warehouse, tmp_path / "home", video_val_source=str(parquets),
                         video_val_prefix_map=prefix)
    home = settings.home
    first = materialize(settings, SELECT, checks=False)
    assert first.success
    before = table_identities(home, STEPS)
    again = materialize(settings, SELECT, checks=False)
    assert again.success and table_identities(home, STEPS) == before  # nothing written again
    for name in STEPS:
        assert _rows(again, name) == _rows(first, name)

    # A video goes missing: the questions say so, its probe and plan follow.
    gone = sorted(p for p in videos.rglob("*.mp4"))[0]
    gone.unlink()
    third = materialize(settings, SELECT, checks=False)
    assert third.success
    assert all(table_identities(home, STEPS)[name] != before[name] for name in STEPS)
    missing = pq.read_table(table_path(home, "vv_questions"),
                            columns=["video_path", "video_exists"]).to_pylist()
    assert any(not r["video_exists"] for r in missing)
    assert all(r["video_exists"] for r in missing if not r["video_path"].endswith(gone.name))

    # A parquet rewritten with the same bytes but a new identity is read again.
    before = table_identities(home, STEPS)
    source = sorted(parquets.glob("*.parquet"))[0]
    data = source.read_bytes()
    source.unlink()
    source.write_bytes(data)
    fourth = materialize(settings, SELECT, checks=False)
    assert fourth.success
    assert table_identities(home, STEPS)["vv_questions"] != before["vv_questions"]
