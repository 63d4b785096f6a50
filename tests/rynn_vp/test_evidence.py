"""Rynn-VP evidence per evaluation: the card's policy, provenance, bad candidates (each with a
clear reason, other cases go on), and each case's part built once per key: a rerun with nothing
changed decodes nothing and writes nothing, one changed candidate rebuilds exactly its case's
parts (decoding only its evaluation). The val frames likewise, one part per planned video."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dagster_project.media.encode import read_frame_index
from dagster_project.runner import materialize
from dagster_project.rynn_vp.evidence import MAX_SOURCE_FRAMES
from dagster_project.rynn_vp.evidence_parts import source_frame_budget
from dagster_project.tables import connect_raw, content_version, table_path
from dagster_project.warehouse.catalog import connect
from tests.conftest import copy_home, settings_for


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


def test_the_source_frame_budget_is_counted_again_only_when_the_parts_change(
        demo_warehouse, tmp_path):
    home = copy_home(demo_warehouse, tmp_path / "home").home
    kept = tmp_path / "cache" / "budget.json"
    con = connect_raw(home, ["rvp_evaluations"])
    expected = con.execute(
        f"SELECT count(*) FILTER (WHERE n_source_frames > {MAX_SOURCE_FRAMES}), "
        "max(n_source_frames) FROM raw.rvp_evaluations").fetchone()
    con.close()
    assert expected[0] == 0 and source_frame_budget(home, kept) == expected
    # the same parts (names and sizes): what was counted, no part opened
    part = sorted(table_path(home, "rvp_evaluations", "_").parent.glob("*.*.parquet"))[0]
    table = pq.read_table(part)
    part.write_bytes(b"x" * part.stat().st_size)
    assert source_frame_budget(home, kept) == expected
    # the case built again (a part under a new name), one evaluation over the budget: counted
    frames = table.column("n_source_frames").to_pylist()
    frames[0] = MAX_SOURCE_FRAMES + 7
    column = table.schema.get_field_index("n_source_frames")
    pq.write_table(table.set_column(column, "n_source_frames",
                                    pa.array(frames, table.schema.field(column).type)),
                   part.with_name(f"{part.stem.rpartition('.')[0]}.{'e' * 16}.parquet"))
    part.unlink()
    assert source_frame_budget(home, kept) == (1, MAX_SOURCE_FRAMES + 7)


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
    # the Rynn-VP tables and views in this home (the evidence reads the rvp_intervals view)
    result = materialize(settings, "+group:rynn_vp", raise_on_error=False, checks=False)
    con = connect(settings.home)
    return result, con, {"truncated": vcases[0].name, "zero": vcases[1].name,
                         "corrupt_step": icases[0].name, "non_numeric": icases[1].name,
                         "video_sys": video_sys[0], "img_sys": img_sys}


@pytest.mark.parametrize(("kind", "words"), [
    ("truncated", "truncated"), ("zero", "cannot open"), ("corrupt_step", "does not decode"),
    ("non_numeric", "not a number")])
@pytest.mark.slow
def test_bad_candidates_get_a_clear_reason(bad_candidates, kind, words):
    result, con, which = bad_candidates
    case_id = which[kind]
    reasons = [r[0] for r in con.execute("SELECT reason FROM rvp_rejects WHERE case_id = ?",
                                         [case_id]).fetchall()]
    problems = [r[0] for r in con.execute("SELECT problem FROM rvp_candidates WHERE case_id = ? "
                                          "AND problem IS NOT NULL", [case_id]).fetchall()]
    assert any(words.lower() in t.lower() for t in reasons + problems), (reasons, problems)


@pytest.mark.slow
def test_other_cases_proceed(bad_candidates):
    result, con, which = bad_candidates
    assert result.success
    n = con.execute("SELECT count(*) FROM rvp_evaluations WHERE problem IS NULL").fetchone()[0]
    assert n >= 30
    # the corrupt step is left out, the remaining steps are evidence
    steps = con.execute("SELECT count(*) FROM rvp_evidence_frames WHERE role = 'step' "
                        "AND case_id = ?", [which["corrupt_step"]]).fetchone()[0]
    assert steps >= 1


EVIDENCE = "key:raw_rvp_evaluations"  # the evidence multi-asset (all three tables)


def _stamps(home: Path) -> dict[str, int]:
    roots = [home / "evidence"] + [home / "tables" / "raw" / t for t in (
        "rvp_evidence_frames", "rvp_storyboards", "rvp_evaluations", "rvp_rejects/rvp_evidence")]
    return {p.relative_to(home).as_posix(): p.stat().st_mtime_ns
            for root in roots for p in root.rglob("*") if p.is_file()}


def _metadata(outcome, key: str) -> dict:
    [event] = [e for e in outcome.get_asset_materialization_events()
               if e.asset_key.to_user_string() == key]
    return {k: v.value for k, v in event.materialization.metadata.items()}


@pytest.mark.slow
def test_only_changed_evaluations_are_extracted_again(demo_warehouse, demo_inputs, tmp_path):
    cands = tmp_path / "cands"
    shutil.copytree(demo_inputs.candidates_root(), cands)
    settings = copy_home(demo_warehouse, tmp_path / "home", candidates_dir=str(cands))
    home = settings.home
    select = f"key:raw_rvp_candidates or key:rvp_intervals or {EVIDENCE}"
    assert materialize(settings, select, checks=False).success  # new paths: all extracted

    first, first_bytes = _stamps(home), _tables(home)
    outcome = materialize(settings, select, checks=False)
    assert outcome.success
    assert _stamps(home) == first  # nothing changed: nothing decoded, nothing written
    meta = _metadata(outcome, "raw_rvp_evaluations")
    assert (meta["parts_written"], meta["evaluations_extracted"]) == (0, 0)

    rejects = content_version(home, "rvp_rejects")
    video = sorted(cands.glob("*/*/candidate.mp4"))
    changed, donor = video[0], video[-1]
    shutil.copy(donor, changed)
    system, case_id = changed.parts[-3], changed.parts[-2]
    # what a run killed between writing an image and renaming it leaves in the case's folder
    stale = home / "evidence" / case_id / system / ".P07.jpg.k1ll3d.tmp"
    stale.write_bytes(b"half a JPEG")
    outcome = materialize(settings, select, checks=False)
    assert outcome.success
    meta = _metadata(outcome, "raw_rvp_evaluations")
    assert (meta["parts_written"], meta["evaluations_extracted"]) == (1, 1)
    assert not stale.exists()  # the case's one writer removed it before writing
    after = _stamps(home)
    rewritten = {p for p in after if after[p] != first.get(p)}
    gone = {p for p in first if p not in after}
    # the case's three parts, under new names (the old ones removed), and its one evaluation's
    # images; every other case and evaluation untouched. No rejects part: it has no rejects,
    # so the rejects table, and what reads it, has not changed.
    assert {p for p in rewritten if p.startswith("tables/")} == {
        p for p in after if p.startswith("tables/") and Path(p).name.startswith(f"{case_id}.")}
    assert len({p for p in rewritten if p.startswith("tables/")}) == len(gone) == 3
    assert content_version(home, "rvp_rejects") == rejects
    assert all(Path(p).name.startswith(f"{case_id}.") for p in gone)
    # its evaluation's images only: S0 and the GT anchors are not decoded again (the case's
    # other evaluations, kept, hold them)
    assert len(list(cands.glob(f"*/{case_id}"))) > 1
    images = {p for p in rewritten if p.startswith("evidence/")}
    assert images and all(p.startswith(f"evidence/{case_id}/{system}/") for p in images)
    assert {p for p in images if "/P" in p}
    con = connect_raw(home, ["rvp_evaluations"])  # this home's parts (no view rebuilt here)
    [(fingerprint,)] = con.execute("SELECT candidate_fingerprint FROM raw.rvp_evaluations "
                                   "WHERE system = ? AND case_id = ?", [system, case_id]
                                   ).fetchall()
    assert fingerprint == hashlib.sha256(donor.read_bytes()).hexdigest()

    # the same tables as extracting everything again from scratch
    incremental = _tables(home)
    assert incremental != first_bytes
    for sub in ("rvp_evidence_frames", "rvp_storyboards", "rvp_evaluations"):
        shutil.rmtree(home / "tables" / "raw" / sub)
    shutil.rmtree(home / "evidence")
    assert materialize(settings, select, checks=False).success
    assert _tables(home) == incremental


def _frame_stamps(home: Path) -> dict[str, int]:
    roots = [home / "frames", home / "tables" / "raw" / "vv_frames"]
    return {p.relative_to(home).as_posix(): p.stat().st_mtime_ns
            for root in roots for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_val_frames_are_decoded_once_per_video(demo_warehouse, tmp_path):
    settings = copy_home(demo_warehouse, tmp_path / "home")
    home = settings.home
    select = "key:raw_vv_videos or key:raw_vv_frame_plan or key:raw_vv_frames"
    first = _frame_stamps(home)
    outcome = materialize(settings, select, checks=False)
    assert outcome.success
    assert _frame_stamps(home) == first  # the parts are named alike in a copied home
    assert _metadata(outcome, "raw_vv_frames")["parts_written"] == 0
    # one video with other bytes (the same frames): exactly its part and images again
    con = connect_raw(home, ["vv_frame_plan"])
    [(video,)] = con.execute("SELECT min(video_path) FROM raw.vv_frame_plan WHERE error IS NULL"
                             ).fetchall()
    path = Path(video)
    assert path.is_relative_to(home)
    path.write_bytes(path.read_bytes() + b"\0" * 16)  # trailing bytes: still the same video
    outcome = materialize(settings, select, checks=False)
    assert outcome.success
    meta = _metadata(outcome, "raw_vv_frames")
    assert (meta["parts_written"], meta["parts_removed"]) == (1, 1)
    after = _frame_stamps(home)
    new = {p for p in after if after[p] != first.get(p)}
    gone = {p for p in first if p not in after}
    stem = Path(video).stem
    assert [p for p in new if p.startswith("tables/")] and all(
        f".{stem}." in p for p in new | gone)
    assert len([p for p in gone if p.startswith("tables/")]) == 1
