"""videorl-video-val ingestion end to end on the demo (Dagster in-process, real files)."""

from __future__ import annotations

import fnmatch
import hashlib
import shutil
from pathlib import Path

import av
import huggingface_hub
import pyarrow.parquet as pq
import pytest

from dagster_project.runner import materialize
from dagster_project.tables import table_path
from dagster_project.video_val.frame_plan import plan_video
from dagster_project.video_val.schema import FOREIGN_PREFIX, SOURCES
from dagster_project.warehouse.catalog import connect
from tests.conftest import settings_for

# The val ingest (parquets, questions, videos, frame plan) and the views over it.
VAL = " or ".join([*(f"key:raw_vv_{t}" for t in ("source", "questions", "videos", "frame_plan")),
                   *(f"1+key:{v}" for v in ("vv_questions", "vv_rejects", "vv_videos",
                                           "vv_unresolved_videos", "vv_frame_plan")),
                   "key:stg_vv_source"])


def _demo_parquets(settings) -> Path:
    return Path(settings.video_val_source_or_demo())


def test_every_parquet_row_is_a_question_or_a_reject(demo_warehouse):
    con = connect(demo_warehouse.home)
    total = 0
    for name, ds in SOURCES.items():
        n = pq.ParquetFile(_demo_parquets(demo_warehouse) / name).metadata.num_rows
        total += n
        got = con.execute("SELECT count(*), min(row_index), max(row_index) FROM vv_questions "
                          "WHERE data_source = ?", [ds]).fetchone()
        assert got == (n, 0, n - 1)
    assert total >= 30
    assert con.execute("SELECT count(*) FROM vv_rejects WHERE action <> 'noted'").fetchone() == (0,)
    uids = con.execute("SELECT uid, data_source, row_index FROM vv_questions").fetchall()
    assert all(uid == f"{ds}:{i}" for uid, ds, i in uids)


def test_options_and_metadata_follow_the_card(demo_warehouse):
    con = connect(demo_warehouse.home)
    letters = dict(con.execute("SELECT data_source, list(DISTINCT option_letters ORDER BY "
                               "option_letters) FROM vv_questions GROUP BY 1").fetchall())
    assert letters["videomme_v1_test"] == ["ABCD"]
    assert letters["perceptioncomp_test"] == ["ABCDE", "ABCDEF"]
    assert letters["video_holmes_test"] == ["ABCDEF"]
    assert con.execute("SELECT count(*) FROM vv_questions WHERE position(ground_truth IN "
                       "option_letters) = 0").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM vv_questions WHERE question LIKE '%\n%'"
                       ).fetchone()[0] >= 3  # multi-line questions survive
    nulls = con.execute("""
        SELECT data_source, count(task), count(category), count(question_type), count(subject),
               count(source_id)
        FROM vv_questions GROUP BY 1 ORDER BY 1""").fetchall()
    for ds, task, cat, qtype, subject, source_id in nulls:
        if ds == "videomme_v1_test":
            assert task and cat and qtype and subject and source_id == 0
        elif ds == "perceptioncomp_test":
            assert task == cat == qtype == 0 and subject and source_id
        else:
            assert task == cat == qtype == subject == 0 and source_id
    # Staging views per source expose only what that source populates.
    cols = {d[0] for d in con.execute("SELECT * FROM stg_vv_videoholmes LIMIT 0").description}
    assert "source_id" in cols and "task" not in cols


def test_video_paths_are_remapped_not_rewritten(demo_warehouse):
    con = connect(demo_warehouse.home)
    rows = con.execute("SELECT video_uri, video_path, video_abspath, prefix_matched, "
                       "video_exists FROM vv_questions").fetchall()
    cache = (demo_warehouse.video_val_demo_dir / "cache").resolve()
    for uri, path, abspath, matched, exists in rows:
        assert uri.startswith(FOREIGN_PREFIX + "/")
        assert abspath == str(cache) + uri[len(FOREIGN_PREFIX):]
        # inside the home: stored relative to it
        assert path == (cache.relative_to(demo_warehouse.home) / uri[len(FOREIGN_PREFIX) + 1:]
                        ).as_posix()
        assert matched and exists
    for name in SOURCES:  # the source files still carry the foreign prefix
        table = pq.read_table(_demo_parquets(demo_warehouse) / name, columns=["videos"])
        assert all(v[0]["video"].startswith(FOREIGN_PREFIX) for v in table["videos"].to_pylist())


def test_frame_plan_equals_the_pure_planner_on_probed_values(demo_warehouse):
    con = connect(demo_warehouse.home)
    plans = con.execute("SELECT video_abspath, total_frames, video_fps, height, width, nframes, "
                        "frame_indices, resized_height, resized_width, sample_fps, fps, "
                        "max_frames, min_pixels, max_pixels, error FROM vv_frame_plan").fetchall()
    assert len(plans) >= 6
    for (path, total, vfps, h, w, n, idx, rh, rw, sfps, fps, mf, minp, maxp, err) in plans:
        with av.open(path) as c:  # independent count: a full decode
            decoded = sum(1 for _ in c.decode(video=0))
            stream = c.streams.video[0]
            assert (h, w) == (stream.codec_context.height, stream.codec_context.width)
        assert total == decoded and err is None
        plan = plan_video(total_frames=total, video_fps=vfps, height=h, width=w, fps=fps,
                          max_frames=mf, min_pixels=minp, max_pixels=maxp)
        assert (n, idx, rh, rw, sfps) == (plan.nframes, list(plan.frame_indices),
                                          plan.resized_height, plan.resized_width, plan.sample_fps)
    by_len = {t: n for _, t, _, _, _, n, *_ in plans}
    assert by_len[max(by_len)] == 64  # the > 70 s video: max_frames binds
    assert by_len[min(by_len)] == 4  # under 4 s: FPS_MIN_FRAMES binds


def test_patch_size_16_is_selectable(demo_warehouse, tmp_path):
    home = tmp_path / "p16"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    settings = settings_for(home)
    import dagster as dg

    from dagster_project.defs.resources import BenchlakeSettings, judge_resource, raw_key
    from dagster_project.runner import definitions

    defs = definitions()
    result = dg.materialize(
        [*defs.assets], selection=dg.AssetSelection.assets(raw_key("vv_frame_plan")),
        resources={"benchlake": BenchlakeSettings.from_settings(settings),
                   "judge": judge_resource()},
        run_config={"ops": {"raw_vv_frame_plan": {"config": {"patch_size": 16}}}})
    assert result.success
    rows = pq.read_table(table_path(settings.home, "vv_frame_plan")).to_pylist()
    assert all(r["patch_size"] == 16 and r["resized_height"] % 32 == 0
               and r["resized_width"] % 32 == 0 for r in rows)


@pytest.fixture(scope="module")
def unresolved(demo_inputs, tmp_path_factory):
    """Only the Video-MME prefix is mapped; one Video-MME video is deleted."""
    home = tmp_path_factory.mktemp("unresolved")
    src = home / "val"
    shutil.copytree(demo_inputs.video_val_demo_dir, src)
    cache = (src / "cache").resolve()
    victim = sorted((cache / "videomme" / "data").glob("*.mp4"))[0]
    victim.unlink()
    prefix_map = f"{FOREIGN_PREFIX}/videomme=file://{cache}/videomme"
    settings = settings_for(home, video_val_source=str(src / "parquets"),
                            video_val_prefix_map=prefix_map)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
              for p in (src / "parquets").iterdir()}
    result = materialize(settings, VAL, raise_on_error=False)
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
             for p in (src / "parquets").iterdir()}
    assert before == after  # the source parquets are never modified
    return result, settings, victim


def test_unmatched_prefixes_and_missing_files_are_counted_per_source(unresolved):
    result, settings, victim = unresolved
    assert result.success
    check = [e for e in result.get_asset_check_evaluations()
             if e.check_name == "vv_videos_resolvable"][0]
    assert not check.passed
    meta = {k: v.value for k, v in check.metadata.items()}
    assert meta["perceptioncomp_test"]["unmatched_prefix"] == 9
    assert meta["video_holmes_test"]["unmatched_prefix"] == 9
    assert meta["videomme_v1_test"]["unmatched_prefix"] == 0
    assert meta["videomme_v1_test"]["missing_file"] == 3  # three questions per video
    con = connect(settings.home)
    listed = dict(con.execute("SELECT problem, count(*) FROM vv_unresolved_videos GROUP BY 1"
                              ).fetchall())
    assert listed == {"no prefix of VIDEO_VAL_PREFIX_MAP matched (outside the video roots: "
                      "never opened)": 18,
                      "video file is missing": 3}
    # The rest flows: questions, probes and plans exist for everything that resolved.
    assert con.execute("SELECT count(*) FROM vv_questions").fetchone() == (30,)
    plan_errors = dict(con.execute(
        "SELECT video_abspath, error FROM vv_frame_plan WHERE error IS NOT NULL").fetchall())
    assert plan_errors[str(victim)].startswith("video cannot be planned: video file is missing")
    assert con.execute("SELECT count(*) FROM vv_frame_plan WHERE error IS NULL").fetchone()[0] >= 3


def test_bad_files_are_rejected_and_the_rest_flows(demo_inputs, tmp_path):
    src = tmp_path / "val"
    shutil.copytree(demo_inputs.video_val_demo_dir / "parquets", src)
    (src / "perceptioncomp-test.parquet").write_bytes(b"PAR1 this is not a parquet file")
    table = pq.read_table(src / "videoholmes-test.parquet").to_pylist()
    table[2]["videos"] = table[2]["videos"] * 2
    import pyarrow as pa

    from dagster_project.video_val.schema import VAL_SCHEMA

    pq.write_table(pa.Table.from_pylist(table, schema=VAL_SCHEMA), src / "videoholmes-test.parquet")
    settings = settings_for(tmp_path / "home", video_val_source=str(src),
                            video_val_prefix_map=demo_inputs.video_val_prefix_map_or_demo())
    assert materialize(settings, VAL).success
    con = connect(settings.home)
    rejects = con.execute("SELECT source_file, row_index, uid, action, reason, raw "
                          "FROM vv_rejects WHERE action <> 'noted' ORDER BY 1").fetchall()
    assert len(rejects) == 2
    (f1, r1, u1, a1, reason1, _), (f2, r2, u2, a2, reason2, raw2) = rejects
    assert f1.endswith("perceptioncomp-test.parquet") and a1 == "file_rejected" and r1 is None
    assert f2.endswith("videoholmes-test.parquet") and (r2, u2, a2) == (
        2, "video_holmes_test:2", "row_rejected")
    assert "2 videos" in reason2 and raw2
    counts = dict(con.execute("SELECT data_source, count(*) FROM vv_questions GROUP BY 1"
                              ).fetchall())
    assert counts == {"videomme_v1_test": 12, "video_holmes_test": 8}


def test_hub_source_downloads_parquets_only(demo_inputs, tmp_path, monkeypatch):
    calls = {}
    demo = demo_inputs.video_val_demo_dir

    class FakeApi:
        def dataset_info(self, repo_id, revision=None):
            calls["info"] = (repo_id, revision)
            return type("Info", (), {"sha": "ab" * 20})()

    def fake_snapshot_download(**kw):
        calls["download"] = kw
        dest = Path(kw["local_dir"])
        for p in demo.rglob("*"):  # nested like a hub repo with a data/ folder
            rel = "data/" + p.relative_to(demo).as_posix()
            if p.is_file() and any(fnmatch.fnmatch(rel, pat) for pat in kw["allow_patterns"]):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dest / rel)
        return str(dest)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    settings = settings_for(tmp_path, video_val_source="hf://datasets/someone/videorl-video-val",
                            video_val_prefix_map=demo_inputs.video_val_prefix_map_or_demo())
    assert materialize(settings, VAL).success
    assert calls["info"] == ("someone/videorl-video-val", None)
    kw = calls["download"]
    assert (kw["repo_type"], kw["revision"]) == ("dataset", "ab" * 20)
    assert not any(fnmatch.fnmatch("data/cache/videomme/data/x.mp4", p)
                   for p in kw["allow_patterns"])  # videos are not part of the repo download
    con = connect(settings.home)
    assert con.execute("SELECT count(*), min(resolved_revision) FROM stg_vv_source").fetchone() \
        == (3, "ab" * 20)
    assert con.execute("SELECT count(*) FROM vv_questions").fetchone() == (30,)
