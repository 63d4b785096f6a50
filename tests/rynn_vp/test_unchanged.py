"""A Rynn-VP materialization with nothing changed reads nothing again: each Python step that
finds its inputs as when it last wrote its table describes the table as then (`status.unchanged`),
and a changed input, a touched table or an unfinished write makes it do its work."""

from __future__ import annotations

import shutil

import pyarrow.parquet as pq

from dagster_project.runner import materialize
from dagster_project.status import mark_started, mark_written, remember_inputs, unchanged
from dagster_project.tables import atomic_write_bytes, table_path
from tests.conftest import copy_home, table_identities

EVIDENCE = ("rvp_evaluations", "rvp_evidence_frames", "rvp_storyboards")
# the Python steps of the group, and what they write (the views are not needed here)
STEPS = ("rvp_checksums", "rvp_media", "rvp_cases", "rvp_intervals", "rvp_candidates", *EVIDENCE,
         "rvp_judge_packets", "rvp_judgment_files", "rvp_judgments")
SELECT = ("key:raw_rvp_snapshot or key:raw_rvp_checksums or key:raw_rvp_media or "
          "key:raw_rvp_cases or key:raw_rvp_candidates or key:rvp_intervals or "
          "key:raw_rvp_evaluations or key:raw_rvp_gt_fingerprints or key:raw_rvp_judgments or "
          "key:raw_rvp_judge_packets")


def test_unchanged_needs_same_inputs_a_finished_write_and_the_files_as_written(tmp_path):
    home = tmp_path / "home"
    path = table_path(home, "t")
    atomic_write_bytes(path, b"one")
    mark_started(home, "t", "run-1")
    assert unchanged(home, "t", "k") is None  # nothing remembered yet
    mark_written(home, "t", "run-1", 1)
    remember_inputs(home, "t", "k", [path], {"rows": 1})
    assert unchanged(home, "t", "k") == {"rows": 1}
    assert unchanged(home, "t", "other inputs") is None
    mark_started(home, "t", "run-2")  # a run that started the table and did not finish
    assert unchanged(home, "t", "k") is None
    mark_written(home, "t", "run-2", 1)
    assert unchanged(home, "t", "k") == {"rows": 1}
    atomic_write_bytes(path, b"one")  # the same bytes, but another file than was written
    assert unchanged(home, "t", "k") is None
    remember_inputs(home, "t", "k", [path], {"rows": 1})
    path.unlink()
    assert unchanged(home, "t", "k") is None
    # a copied home checks its own files, not those of the home it was copied from
    atomic_write_bytes(path, b"one")
    remember_inputs(home, "t", "k", [path], {"rows": 1})
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    assert unchanged(copy, "t", "k") is None
    table_path(home, "t").unlink()
    assert unchanged(home, "t", "k") is None


def _metadata(outcome, name: str) -> dict:
    [event] = [e for e in outcome.get_asset_materialization_events()
               if e.asset_key.to_user_string() == f"raw_{name}"]
    return {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}


def test_nothing_changed_rewrites_nothing_and_a_changed_input_is_read(
        demo_warehouse, rynn_vp_copy, tmp_path):
    cands = tmp_path / "cands"
    shutil.copytree(demo_warehouse.candidates_root(), cands)
    settings = copy_home(demo_warehouse, tmp_path / "home", rynn_vp_source=str(rynn_vp_copy),
                         candidates_dir=str(cands))
    home = settings.home
    first = materialize(settings, SELECT, checks=False)  # a copied home: every step works
    assert first.success
    before = table_identities(home, STEPS)
    again = materialize(settings, SELECT, checks=False)
    assert again.success
    assert table_identities(home, STEPS) == before  # no table written again
    # what a run did: nothing, this time
    work = {"units_built", "file_versions_checked", "segments_written", "parts_written",
            "parts_removed", "evaluations_extracted"}
    for name in STEPS:  # described as when written
        now, then = _metadata(again, name), _metadata(first, name)
        assert {k: v for k, v in now.items() if k not in work} == {
            k: v for k, v in then.items() if k not in work}, name
        assert all(now[k] == 0 for k in work & now.keys())
    assert {"units_built", "file_versions_checked", "evaluations_extracted"} <= {
        k for name in STEPS for k in _metadata(again, name)}
    evidence = sorted((home / "evidence").rglob("*.jpg"))
    stamps = {p: p.stat().st_mtime_ns for p in evidence}

    # an evidence image removed from a case's folder, and a panel from a system's folder of
    # another case: both cases are extracted again, the images are back
    gone = evidence[0]
    panel = next(p for p in evidence if p.parent.name != "gt" and p.name.startswith("P")
                 and p.parent.parent.name != gone.relative_to(home / "evidence").parts[0])
    gone.unlink()
    panel.unlink()
    outcome = materialize(settings, SELECT, checks=False)
    assert outcome.success and gone.is_file() and panel.is_file()
    assert _metadata(outcome, "rvp_evaluations")["parts_written"] == 2  # those cases, same keys
    others = [s for s in STEPS if s not in EVIDENCE]  # the evidence's two parts written again
    assert table_identities(home, others) == {s: before[s] for s in others}
    again = materialize(settings, SELECT, checks=False)  # and now described again, unread
    assert _metadata(again, "rvp_evaluations")["parts_written"] == 0

    # a snapshot file changed: its checksum is verified again and the case refused
    task = sorted(rynn_vp_copy.glob("cases/*/task.json"))[0]
    task.write_text(task.read_text() + " ")
    # a candidate changed: scanned again
    video = sorted(cands.glob("*/*/candidate.mp4"))
    shutil.copy(video[-1], video[0])
    outcome = materialize(settings, SELECT, checks=False)
    assert outcome.success
    after = table_identities(home, STEPS)
    assert after["rvp_checksums"] != before["rvp_checksums"]
    assert after["rvp_cases"] != before["rvp_cases"]  # read again: the case is refused
    assert task.parent.name not in {r["case_id"] for r in pq.read_table(
        table_path(home, "rvp_cases"), columns=["case_id"]).to_pylist()}
    assert after["rvp_candidates"] != before["rvp_candidates"]
    assert _metadata(outcome, "rvp_checksums")["status_counts"]["mismatch"] == 1
    # no judgment record in the folder: none to check against what changed, nothing rewritten
    assert after["rvp_judgment_files"] == before["rvp_judgment_files"]
    assert after["rvp_judgments"] == before["rvp_judgments"]
    # the images of every other case are as they were
    touched = {gone.relative_to(home / "evidence").parts[0], panel.parent.parent.name,
               task.parent.name, video[0].parent.name}
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items()
               if p.relative_to(home / "evidence").parts[0] not in touched)


def test_run_history_is_dagsters_own_files(demo_inputs, tmp_path):
    """The event log benchlake writes (`instance_storage`) is Dagster's SQLite layout: runs made
    by two materializations in one process are read back, events and all, by an instance with
    Dagster's own storage over the same folder."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from dagster_project.instance_storage import EventLogStorage
    from dagster_project.runner import dagster_instance
    from tests.conftest import settings_for

    settings = settings_for(tmp_path / "home", rynn_vp_source=demo_inputs.rynn_vp_source_or_demo())
    instance = dagster_instance(settings)
    assert isinstance(instance.event_log_storage, EventLogStorage)
    runs = [materialize(settings, "key:raw_rvp_snapshot", instance=instance) for _ in range(2)]
    assert all(r.success for r in runs)
    key = dg.AssetKey("raw_rvp_snapshot")
    # no dagster.yaml read: Dagster's default storage over the same folder
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(
            str(settings.dagster_home), config_filename="absent.yaml")) as own:
        assert not isinstance(own.event_log_storage, EventLogStorage)
        assert {r.run_id for r in own.get_runs()} == {r.run_id for r in runs}
        latest = own.get_latest_materialization_event(key)
        assert latest is not None and latest.run_id == runs[-1].run_id
        assert len(own.all_logs(runs[0].run_id)) == len(instance.all_logs(runs[0].run_id)) > 10


def test_images_untouched_until_a_folder_of_images_changes_after_the_parts(tmp_path):
    """The evidence step describes its tables again only while no folder of images changed
    after the newest part: a removed or added image (its folder's time) makes it run."""
    import os

    from dagster_project.rynn_vp.evidence_parts import images_untouched

    home = tmp_path / "home"
    panel = home / "evidence" / "case-1" / "sys" / "P01.jpg"
    panel.parent.mkdir(parents=True)
    panel.write_bytes(b"jpg")
    assert not images_untouched(home)  # no part yet
    parts = [table_path(home, t, "case-1") for t in EVIDENCE]
    for part in parts:
        atomic_write_bytes(part, b"part")
    assert images_untouched(home)
    panel.unlink()  # after the parts
    later = max(p.stat().st_mtime_ns for p in parts) + 1_000_000
    os.utime(panel.parent, ns=(later, later))  # whatever the clock's resolution
    assert not images_untouched(home)
    os.utime(parts[0], ns=(later, later))  # the case's parts written again after its images
    assert images_untouched(home)
    os.utime(home / "evidence", ns=(later + 1, later + 1))  # a case folder added or removed
    assert not images_untouched(home)
    shutil.rmtree(home / "evidence")
    assert not images_untouched(home)  # no images: the step runs
