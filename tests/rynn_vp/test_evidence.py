"""Rynn-VP evidence per evaluation: the card's policy, provenance, partitions in parallel,
byte-identical reruns and bad candidates (each with a clear reason, other partitions go on)."""

from __future__ import annotations

import json
import math
import shutil
import threading
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
from PIL import Image

from dagster_project.media.encode import read_frame_index
from dagster_project.runner import materialize, rvp_evidence_job
from dagster_project.tables import table_path
from dagster_project.warehouse.catalog import connect
from tests.conftest import settings_for


def rows(con, sql, params=()):
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def test_every_evaluation_follows_the_evidence_policy(demo_warehouse):
    con = connect(demo_warehouse.home)
    evals = rows(con, "SELECT * FROM rvp_evaluations")
    present = con.execute("SELECT count(*) FROM rvp_candidate_coverage WHERE status = 'present'"
                          ).fetchone()[0]
    assert len(evals) == present > 0
    for ev in evals:
        frames = rows(con, "SELECT * FROM rvp_evidence_frames WHERE evaluation_id = ? "
                           "ORDER BY role, ordinal", [ev["evaluation_id"]])
        roles = [f["role"] for f in frames]
        assert len(frames) == ev["n_source_frames"] <= 50
        assert roles.count("S0") == 1 and 1 <= roles.count("anchor") <= 4
        if ev["modality"] == "video":
            assert roles.count("panel") == ev["n_panels"] == min(30, ev["n_panels"])
            assert "step" not in roles
            boards = rows(con, "SELECT * FROM rvp_storyboards WHERE evaluation_id = ? "
                               "ORDER BY storyboard_no", [ev["evaluation_id"]])
            assert len(boards) == math.ceil(ev["n_panels"] / 6)
            assert sum(b["panel_count"] for b in boards) == ev["n_panels"]
            assert ev["truncated"] == (ev["n_panels"] < 30)
        else:
            steps = [f for f in frames if f["role"] == "step"]
            assert steps and all(f["used_s"] is None and f["pts"] is None for f in steps)
            ids = [f["step_id"] for f in sorted(steps, key=lambda f: f["ordinal"])]
            assert ids == sorted(ids, key=int)
            assert ev["evidence_gaps"] == [f"{a}->{b}" for a, b in zip(["S0", *ids], ids,
                                                                       strict=False)]
        for f in frames:
            assert Path(f["image_abspath"]).is_file()
            assert f["image_abspath"] == str(demo_warehouse.home / f["image_path"])
            with Image.open(f["image_abspath"]) as im:
                assert im.size == (f["width"], f["height"])


def test_one_candidate_is_truncated_and_recorded(demo_warehouse):
    con = connect(demo_warehouse.home)
    short = rows(con, "SELECT * FROM rvp_evaluations WHERE truncated")
    assert len(short) == 1 and short[0]["n_panels"] == 20  # the demo's 20-frame candidate
    assert short[0]["clip_start_s"] == 0 and short[0]["clip_end_s"] == pytest.approx(19 / 24)


def test_anchors_follow_the_documented_rule(demo_warehouse):
    """Recomputed from the raw annotations: ends of the non-Done intervals at ceil(k/4),
    ceil(k/2), ceil(3k/4) and k, clamped into the decodable range."""
    con = connect(demo_warehouse.home)
    root = Path(demo_warehouse.rynn_vp_source_or_demo())
    media = {r["case_id"]: r for r in rows(con, "SELECT * FROM rvp_media")}
    anchors = rows(con, "SELECT DISTINCT case_id, ordinal, requested_s, used_s, frame_index, "
                        "interval_ordinal FROM rvp_evidence_frames WHERE role = 'anchor'")
    by_case: dict[str, list] = {}
    for a in anchors:
        by_case.setdefault(a["case_id"], []).append(a)
    for case_id, got in by_case.items():
        ann = json.loads((root / "cases" / case_id / "gt_annotations.json").read_text())
        actions = [(n, k) for n, (k, v) in enumerate(ann["planning"].items(), start=1)
                   if v not in ("Done", "Done.")]
        k = len(actions)
        picks = list(dict.fromkeys([math.ceil(k / 4), math.ceil(k / 2), math.ceil(3 * k / 4), k]))
        expected = [actions[p - 1] for p in picks]
        got.sort(key=lambda a: a["ordinal"])
        assert [a["interval_ordinal"] for a in got] == [n for n, _ in expected]
        m = media[case_id]
        fps = m["fps"]
        for a, (_, key) in zip(got, expected, strict=True):
            end = float(key.split("-")[1].rstrip("s"))
            assert a["requested_s"] == end
            clamped = min(max(end, m["first_frame_s"]), m["last_frame_s"])
            # the frame shown at the clamped time
            assert a["frame_index"] == min(int(clamped * fps + 1e-9), m["frame_count"] - 1)
            assert a["used_s"] == pytest.approx(a["frame_index"] / fps)


def test_panels_are_the_frames_they_claim(demo_warehouse):
    """The demo videos carry their frame index as a barcode: read it back from the JPEGs."""
    con = connect(demo_warehouse.home)
    panels = rows(con, "SELECT frame_index, image_abspath, evaluation_id FROM rvp_evidence_frames "
                       "WHERE role IN ('panel', 'anchor')")
    assert len(panels) > 300
    for p in panels:
        with Image.open(p["image_abspath"]) as im:
            assert read_frame_index(np.asarray(im.convert("RGB"))) == p["frame_index"], p


def test_evidence_ids_are_unique_and_scoped(demo_warehouse):
    con = connect(demo_warehouse.home)
    dup = con.execute("SELECT count(*) - count(DISTINCT evidence_id) FROM rvp_evidence_frames")
    assert dup.fetchone() == (0,)
    bad = con.execute("SELECT count(*) FROM rvp_evidence_frames "
                      "WHERE NOT starts_with(evidence_id, evaluation_id || '#')").fetchone()
    assert bad == (0,)


def test_coverage_shows_missing_candidates(demo_warehouse):
    con = connect(demo_warehouse.home)
    got = dict(con.execute("SELECT system, count(*) FILTER (status = 'missing') "
                           "FROM rvp_candidate_coverage GROUP BY 1").fetchall())
    assert len(got) >= 3 and any(v > 0 for v in got.values())
    assert con.execute("SELECT count(DISTINCT modality) FROM rvp_candidates").fetchone() == (2,)


def test_val_frames_match_the_plan(demo_warehouse):
    con = connect(demo_warehouse.home)
    plans = rows(con, "SELECT video_path, nframes, frame_indices, resized_width, resized_height "
                      "FROM vv_frame_plan WHERE error IS NULL")
    for p in plans:
        frames = rows(con, "SELECT DISTINCT frame_no, frame_index, width, height, image_abspath "
                           "FROM vv_frames WHERE video_path = ? ORDER BY frame_no",
                      [p["video_path"]])
        assert [f["frame_index"] for f in frames] == p["frame_indices"]
        assert all((f["width"], f["height"]) == (p["resized_width"], p["resized_height"])
                   for f in frames)
        with Image.open(frames[-1]["image_abspath"]) as im:
            assert im.size == (p["resized_width"], p["resized_height"])


def _tables(home: Path) -> dict[str, bytes]:
    """Every file the evidence partitions wrote: their Parquet and their images."""
    roots = [home / "tables" / "raw" / t for t in ("rvp_evidence_frames", "rvp_storyboards",
                                           "rvp_evaluations")] + [home / "evidence"]
    return {p.relative_to(home).as_posix(): p.read_bytes()
            for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


def test_partitions_run_in_parallel_under_the_multiprocess_executor(demo_warehouse, tmp_path,
                                                                    monkeypatch):
    home = tmp_path / "mp"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    for sub in ("rvp_evidence_frames", "rvp_storyboards", "rvp_evaluations"):
        shutil.rmtree(home / "tables" / "raw" / sub)
    shutil.rmtree(home / "evidence")
    monkeypatch.setenv("BENCHLAKE_HOME", str(home))  # the executor's child processes read it
    settings = settings_for(home)
    keys = [k for k in sorted(p.name for p in (Path(settings.rynn_vp_source_or_demo()) / "cases")
                              .iterdir())][:2]
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    instance.add_dynamic_partitions("rvp_case", keys)
    results: dict[str, bool] = {}

    def launch(key: str) -> None:
        with dg.execute_job(dg.reconstructable(rvp_evidence_job), instance=instance,
                            tags={"dagster/partition": key}) as result:
            results[key] = result.success
            logs = " ".join(str(e.message) for e in result.all_events)
            assert "locked" not in logs.lower()

    threads = [threading.Thread(target=launch, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert results == {k: True for k in keys}
    for key in keys:
        assert table_path(home, "rvp_evidence_frames", key).exists()
    first = _tables(home)
    with dg.execute_job(dg.reconstructable(rvp_evidence_job), instance=instance,
                        tags={"dagster/partition": keys[0]}) as result:
        assert result.success
    assert _tables(home) == first  # re-running a partition: byte-identical outputs
    instance.dispose()


def test_sensor_syncs_case_partitions(demo_warehouse):
    from dagster_project.defs.resources import BenchlakeSettings
    from dagster_project.defs.rynn_vp.sensors import rvp_case_partitions_sensor

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("rvp_case", ["stale-case"])
    ctx = dg.build_sensor_context(instance=instance, resources={
        "benchlake": BenchlakeSettings.from_settings(demo_warehouse)})
    result = rvp_case_partitions_sensor(ctx)
    (add, remove) = result.dynamic_partitions_requests
    cases = sorted(p.name for p in (Path(demo_warehouse.rynn_vp_source_or_demo()) / "cases")
                   .iterdir())
    assert sorted(add.partition_keys) == cases and list(remove.partition_keys) == ["stale-case"]


@pytest.fixture(scope="module")
def bad_candidates(demo_inputs, tmp_path_factory):
    home = tmp_path_factory.mktemp("badcands")
    cands = home / "cands"
    shutil.copytree(demo_inputs.candidates_root(), cands)
    systems = sorted(p.name for p in cands.iterdir())
    video_sys = [s for s in systems if (next((cands / s).iterdir()) / "candidate.mp4").exists()]
    img_sys = [s for s in systems if s not in video_sys][0]
    vcases = sorted((cands / video_sys[0]).iterdir())
    trunc = vcases[0] / "candidate.mp4"
    trunc.write_bytes(trunc.read_bytes()[: trunc.stat().st_size // 2])
    (vcases[1] / "candidate.mp4").write_bytes(b"\x00" * 4096)  # zero decodable frames
    icases = sorted((cands / img_sys).iterdir())
    step = sorted((icases[0] / "steps").iterdir())[0]
    step.write_bytes(step.read_bytes()[:200])  # corrupt step image
    shutil.copy(sorted((icases[1] / "steps").iterdir())[0], icases[1] / "steps" / "intro.png")
    settings = settings_for(home, candidates_dir=str(cands))
    result = materialize(settings, "group:rynn_vp and not kind:dbt", raise_on_error=False)
    con = connect(settings.home)
    return result, con, {"truncated": vcases[0].name, "zero": vcases[1].name,
                         "corrupt_step": icases[0].name, "non_numeric": icases[1].name,
                         "video_sys": video_sys[0], "img_sys": img_sys}


@pytest.mark.parametrize(("kind", "words"), [
    ("truncated", "truncated"), ("zero", "cannot open"), ("corrupt_step", "does not decode"),
    ("non_numeric", "not a number")])
def test_bad_candidates_get_a_clear_reason(bad_candidates, kind, words):
    result, con, which = bad_candidates
    case_id = which[kind]
    reasons = [r[0] for r in con.execute("SELECT reason FROM rvp_rejects WHERE case_id = ?",
                                         [case_id]).fetchall()]
    problems = [r[0] for r in con.execute("SELECT problem FROM rvp_candidates WHERE case_id = ? "
                                          "AND problem IS NOT NULL", [case_id]).fetchall()]
    assert any(words.lower() in t.lower() for t in reasons + problems), (reasons, problems)


def test_other_partitions_proceed(bad_candidates):
    result, con, which = bad_candidates
    assert result.success
    n = con.execute("SELECT count(*) FROM rvp_evaluations WHERE problem IS NULL").fetchone()[0]
    assert n >= 30
    # the corrupt step is left out, the remaining steps are evidence
    steps = con.execute("SELECT count(*) FROM rvp_evidence_frames WHERE role = 'step' "
                        "AND case_id = ?", [which["corrupt_step"]]).fetchone()[0]
    assert steps >= 1


def test_only_changed_evaluations_are_extracted_again(demo_warehouse, demo_inputs, tmp_path):
    cands = tmp_path / "cands"
    shutil.copytree(demo_inputs.candidates_root(), cands)
    home = tmp_path / "home"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    settings = settings_for(home, candidates_dir=str(cands))
    select = "key:raw_rvp_candidates+ and not kind:dbt and not group:reports"
    assert materialize(settings, select).success  # new candidate paths: all extracted

    def stamps() -> dict[str, int]:
        roots = [home / "evidence", home / "tables" / "raw" / "rvp_evaluations"]
        return {p.relative_to(home).as_posix(): p.stat().st_mtime_ns
                for root in roots for p in root.rglob("*") if p.is_file()}

    first, first_bytes = stamps(), _tables(home)
    assert materialize(settings, select).success
    assert stamps() == first  # nothing changed: nothing decoded, nothing rewritten

    video = sorted(cands.glob("*/*/candidate.mp4"))
    changed, donor = video[0], video[-1]
    shutil.copy(donor, changed)
    system, case_id = changed.parts[-3], changed.parts[-2]
    assert materialize(settings, select).success
    after = stamps()
    rewritten = {p for p in first if after.get(p) != first[p]}
    assert rewritten, "the changed candidate was not extracted again"
    assert all(p.startswith(f"evidence/{case_id}/") or p.endswith(f"/{case_id}.parquet")
               for p in rewritten), rewritten
    panels = {p for p in rewritten if "/P" in p}
    assert panels and all(p.startswith(f"evidence/{case_id}/{system}/") for p in panels)
    con = connect(home)
    [(fingerprint,)] = con.execute("SELECT candidate_fingerprint FROM rvp_evaluations WHERE "
                                   "system = ? AND case_id = ?", [system, case_id]).fetchall()
    import hashlib

    assert fingerprint == hashlib.sha256(donor.read_bytes()).hexdigest()

    # the same tables as extracting everything again from scratch
    incremental = _tables(home)
    assert incremental != first_bytes
    for sub in ("rvp_evidence_frames", "rvp_storyboards", "rvp_evaluations"):
        shutil.rmtree(home / "tables" / "raw" / sub)
    shutil.rmtree(home / "evidence")
    assert materialize(settings, select).success
    assert _tables(home) == incremental
