"""Rynn-VP candidates: the embedded demo (layout, quirks, determinism) and `scan_candidates`
(rows on the demo; each kind of bad input refused with a clear reason, nothing dropped)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import av
import pytest

from benchlake_demo.rvp_candidates import (
    SHORT_FRAMES,
    STORYBOARD,
    SYSTEMS,
    VEO,
    WAN,
    build_candidates_demo,
    demo_plan,
)
from benchlake_demo.rynn_vp import load_spec
from dagster_project.media.probe import probe_video
from dagster_project.rynn_vp.candidates import CANDIDATES_SCHEMA, scan_candidates
from dagster_project.tables import Reject

CASE_IDS = [str(c["case_id"]) for c in load_spec()["cases"]]
KNOWN = set(CASE_IDS)
UNKNOWN_CASE = "source9_9-Garage-Room_01-Task_01-Variant_01-001"


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def assert_nothing_dropped(root: Path, rows: list[dict[str, Any]], rejects: list[Reject]) -> None:
    """Every file is in a row, or a Reject names it or a folder holding it."""
    used = {Path(r["path"]) for r in rows if r["modality"] == "video"}
    used |= {Path(p) for r in rows for p in (r["step_paths"] or [])}
    refused = {r.source_file for r in rejects}
    for path in root.resolve().rglob("*"):
        if path.is_dir() or path in used:
            continue
        rel = path.relative_to(root.resolve())
        covering = {rel.as_posix()} | {p.as_posix() for p in rel.parents}
        assert covering & refused, f"{rel} is neither in a row nor rejected"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_candidates_demo(tmp_path_factory.mktemp("cands") / "candidates")


@pytest.fixture(scope="module")
def demo_scan(demo: Path) -> tuple[list[dict[str, Any]], list[Reject]]:
    return scan_candidates(demo, KNOWN)


# --- the demo --------------------------------------------------------------------------------


def test_demo_refuses_existing_dest(tmp_path: Path) -> None:
    with pytest.raises(FileExistsError):
        build_candidates_demo(tmp_path)


def test_demo_layout(demo: Path) -> None:
    assert sorted(p.name for p in demo.iterdir()) == sorted(SYSTEMS)
    assert all(p.is_dir() for p in demo.iterdir())  # nothing at the root a scan would refuse
    assert len(SYSTEMS) >= 3
    cases = {s: sorted(p.name for p in (demo / s).iterdir()) for s in SYSTEMS}
    assert cases[VEO] == cases[STORYBOARD] == sorted(CASE_IDS)
    assert 0 < len(cases[WAN]) < len(CASE_IDS)  # wan-sim misses some cases
    assert set(cases[WAN]) < KNOWN
    for cid in CASE_IDS:
        assert sorted(p.name for p in (demo / VEO / cid).iterdir()) == ["candidate.mp4"]
        steps = demo / STORYBOARD / cid / "steps"
        assert sorted(p.name for p in (demo / STORYBOARD / cid).iterdir()) == ["steps"]
        names = sorted(p.name for p in steps.iterdir())
        assert 4 <= len(names) <= 9 and all(n.endswith(".png") for n in names)


def test_demo_has_a_short_video(demo: Path) -> None:
    short = [c for c in demo_plan() if c.modality == "video" and c.n_frames < 30]
    assert len(short) == 1 and short[0].n_frames == SHORT_FRAMES
    p = probe_video(demo / short[0].rel_dir / "candidate.mp4")
    assert p.ok and p.frame_count == SHORT_FRAMES and p.codec == "h264"


def test_demo_videos_are_real_h264_with_motion(demo: Path) -> None:
    cand = next(c for c in demo_plan() if c.system == WAN)
    with av.open(str(demo / cand.rel_dir / "candidate.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for _, f in zip(range(30), container.decode(video=0),
                                                                strict=False)]
    assert frames[0].shape == (cand.height, cand.width, 3)
    assert (frames[0] != frames[-1]).mean() > 0.05  # content moves


def test_demo_is_byte_identical_across_builds(demo: Path, tmp_path: Path) -> None:
    again = build_candidates_demo(tmp_path / "again")
    first, second = tree_bytes(demo), tree_bytes(again)
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []


# --- scan on the demo ------------------------------------------------------------------------


def test_scan_demo_rows_match_the_plan(demo: Path, demo_scan) -> None:
    rows, rejects = demo_scan
    assert rejects == []
    plan = demo_plan()
    assert [(r["system"], r["case_id"]) for r in rows] == [(c.system, c.case_id) for c in plan]
    for row, cand in zip(rows, plan, strict=True):
        assert set(row) == set(CANDIDATES_SCHEMA.names)
        assert row["modality"] == cand.modality and row["ok"] and row["problem"] is None
        assert Path(row["path"]).is_absolute()
        assert (row["width"], row["height"]) == (cand.width, cand.height)
        if cand.modality == "video":
            assert row["path"] == str((demo / cand.rel_dir / "candidate.mp4").resolve())
            assert row["frame_count"] == cand.n_frames
            assert row["duration_s"] == pytest.approx(cand.n_frames / 24, abs=1e-3)  # mp4 ticks
            assert row["first_frame_s"] == 0.0
            assert row["last_frame_s"] == pytest.approx((cand.n_frames - 1) / 24)
            assert row["step_count"] is None
            digest = hashlib.sha256(Path(row["path"]).read_bytes()).hexdigest()
            assert row["fingerprint"] == digest
        else:
            assert row["path"] == str((demo / cand.rel_dir / "steps").resolve())
            assert row["step_ids"] == list(cand.step_ids)
            assert row["step_count"] == len(cand.step_ids)
            assert [Path(p).stem for p in row["step_paths"]] == list(cand.step_ids)
            assert row["duration_s"] is None


def test_scan_demo_modalities_and_counts(demo_scan) -> None:
    rows, _ = demo_scan
    by_system: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_system.setdefault(row["system"], []).append(row)
    assert {r["modality"] for r in by_system[STORYBOARD]} == {"images"}
    assert {r["modality"] for r in by_system[VEO] + by_system[WAN]} == {"video"}
    assert len(by_system[VEO]) == len(by_system[STORYBOARD]) == len(CASE_IDS)
    assert len(by_system[WAN]) < len(CASE_IDS)
    assert min(r["frame_count"] for r in by_system[VEO]) == SHORT_FRAMES
    gapped = [r["step_ids"] for r in by_system[STORYBOARD] if r["step_ids"][2] != "03"]
    assert len(gapped) == 1 and gapped[0][:3] == ["01", "02", "04"]  # a gap, not renumbered


def test_scan_fingerprints_are_stable_and_distinct(demo: Path, demo_scan, tmp_path: Path) -> None:
    rows, _ = demo_scan
    fingerprints = [r["fingerprint"] for r in rows]
    assert len(set(fingerprints)) == len(rows)
    moved = tmp_path / "elsewhere"
    shutil.copytree(demo, moved)  # the fingerprint is content, not location
    assert [r["fingerprint"] for r in scan_candidates(moved, KNOWN)[0]] == fingerprints


def test_scan_orders_steps_numerically(demo: Path, tmp_path: Path) -> None:
    src = next(demo.glob(f"{STORYBOARD}/*/steps/01.png"))
    steps = tmp_path / "sys" / CASE_IDS[0] / "steps"
    steps.mkdir(parents=True)
    for name in ["10.png", "2.png", "1.jpg", "003.png"]:
        shutil.copy(src, steps / name)
    rows, rejects = scan_candidates(tmp_path, KNOWN)
    assert rejects == []
    assert rows[0]["step_ids"] == ["1", "2", "003", "10"]  # not "003" < "1" < "10" < "2"
    # Renaming a step changes the fingerprint: names are part of it, not only bytes.
    before = rows[0]["fingerprint"]
    (steps / "10.png").rename(steps / "11.png")
    assert scan_candidates(tmp_path, KNOWN)[0][0]["fingerprint"] != before


def test_scan_missing_root_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        scan_candidates(tmp_path / "nope", None)


def test_unknown_cases_accepted_without_known_cases(demo: Path, tmp_path: Path) -> None:
    case = tmp_path / VEO / UNKNOWN_CASE
    case.mkdir(parents=True)
    shutil.copy(next(demo.glob(f"{VEO}/*/candidate.mp4")), case / "candidate.mp4")
    rows, rejects = scan_candidates(tmp_path, None)
    assert [r["case_id"] for r in rows] == [UNKNOWN_CASE] and rejects == []


def test_a_candidate_of_a_refused_case_names_the_refusal(demo: Path, tmp_path: Path) -> None:
    case = tmp_path / VEO / CASE_IDS[0]
    case.mkdir(parents=True)
    shutil.copy(next(demo.glob(f"{VEO}/*/candidate.mp4")), case / "candidate.mp4")
    why = f"case refused at rvp_checksums: cases/{CASE_IDS[0]}/gt.mp4: SHA-256 differs"
    rows, rejects = scan_candidates(tmp_path, KNOWN - {CASE_IDS[0]}, None, {CASE_IDS[0]: why})
    assert rows == [] and [(r.case_id, r.reason) for r in rejects] == [(CASE_IDS[0], why)]


# --- bad input -------------------------------------------------------------------------------

# mutation -> (rejected path relative to the case folder ("" = the folder), words in the reason,
#              what happens to the row: "none", "ok" (listed, usable) or "broken" (ok=False))
BAD: dict[str, tuple[str, str, str]] = {
    "truncated_mp4": ("candidate.mp4", "video probe failed: cannot open: moov atom not found",
                      "broken"),
    "truncated_faststart_mp4": ("candidate.mp4", "video probe failed: truncated", "broken"),
    "random_bytes_mp4": ("candidate.mp4", "video probe failed: cannot open", "broken"),
    "corrupt_step_image": ("steps/02.png", "step image does not decode", "ok"),
    "garbage_step_image": ("steps/03.png", "unrecognized image data", "ok"),
    "non_numeric_step_names": ("steps/intro.png", "'intro' is not a number", "ok"),
    "duplicate_step_number": ("steps/1.png", "duplicate step number 1 (01.png, 1.png)", "ok"),
    "not_an_image_suffix": ("steps/04.txt", "not a step image", "ok"),
    "empty_steps_folder": ("steps", "holds no usable step images", "broken"),
    "both_video_and_steps": ("", "ambiguous candidate: both candidate.mp4 and steps/", "none"),
    "unknown_case": ("", "unknown case_id", "none"),
    "neither_video_nor_steps": ("", "no candidate", "none"),
    "unexpected_file": ("notes.txt", "unexpected file in a candidate folder", "ok"),
    "unexpected_folder": ("frames", "unexpected folder in a candidate folder (2 file(s)", "ok"),
}


def _remux_faststart(src: Path, dst: Path) -> None:
    """Same packets with the index (moov) first, so a cut file still opens."""
    with av.open(str(src)) as inp, av.open(str(dst), "w", format="mp4",
                                           options={"movflags": "+faststart"}) as out:
        in_stream = inp.streams.video[0]
        out_stream = out.add_stream_from_template(in_stream)
        for packet in inp.demux(in_stream):
            if packet.dts is None:
                continue
            packet.stream = out_stream
            out.mux(packet)


def _halve(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _break(root: Path, demo: Path) -> dict[str, tuple[str, str]]:
    """Build one broken candidate per mutation under `root`; returns {mutation: (system, case)}."""
    video = next(c for c in demo_plan() if c.system == WAN)
    images = next(c for c in demo_plan() if c.system == STORYBOARD)
    src_mp4 = demo / video.rel_dir / "candidate.mp4"
    src_steps = demo / images.rel_dir / "steps"
    chosen: dict[str, tuple[str, str]] = {}
    for i, mutation in enumerate(BAD):
        system = "bad-video" if "mp4" in mutation else "bad-images"
        case_id = UNKNOWN_CASE if mutation == "unknown_case" else CASE_IDS[i % len(CASE_IDS)]
        case = root / system / case_id
        chosen[mutation] = (system, case_id)
        case.mkdir(parents=True)
        if system == "bad-video":
            shutil.copy(src_mp4, case / "candidate.mp4")
        elif mutation != "neither_video_nor_steps":
            shutil.copytree(src_steps, case / "steps")
    assert len(set(chosen.values())) == len(chosen)  # one mutation per case folder

    def case(mutation: str) -> Path:
        return root.joinpath(*chosen[mutation])

    _halve(case("truncated_mp4") / "candidate.mp4")
    fast = case("truncated_faststart_mp4") / "candidate.mp4"
    _remux_faststart(src_mp4, fast)
    _halve(fast)
    (case("random_bytes_mp4") / "candidate.mp4").write_bytes(
        hashlib.sha256(b"seed").digest() * 2000)
    _halve(case("corrupt_step_image") / "steps" / "02.png")
    (case("garbage_step_image") / "steps" / "03.png").write_bytes(b"\x89PNG not really" * 50)
    shutil.copy(src_steps / "01.png", case("non_numeric_step_names") / "steps" / "intro.png")
    shutil.copy(src_steps / "01.png", case("duplicate_step_number") / "steps" / "1.png")
    (case("not_an_image_suffix") / "steps" / "04.txt").write_text("step four: open the drawer\n")
    shutil.rmtree(case("empty_steps_folder") / "steps")
    (case("empty_steps_folder") / "steps").mkdir()
    shutil.copy(src_mp4, case("both_video_and_steps") / "candidate.mp4")
    (case("unknown_case") / "notes.txt").write_text("an extra file inside an unknown case\n")
    (case("neither_video_nor_steps") / "README").write_text("forgot the candidate\n")
    (case("unexpected_file") / "notes.txt").write_text("generation prompt: ...\n")
    frames = case("unexpected_folder") / "frames"
    frames.mkdir()
    for name in ("a.png", "b.png"):
        shutil.copy(src_steps / "01.png", frames / name)
    return chosen


@pytest.fixture(scope="module")
def broken(demo: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("broken") / "candidates"
    chosen = _break(root, demo)
    (root / "README.md").write_text("stray file at the root\n")
    (root / "bad-video" / "summary.csv").write_text("system,score\n")
    rows, rejects = scan_candidates(root, KNOWN)
    return root, chosen, rows, rejects


@pytest.mark.parametrize("mutation", list(BAD))
def test_bad_input_rejected_with_reason(broken, mutation: str) -> None:
    root, chosen, rows, rejects = broken
    system, case_id = chosen[mutation]
    rel, words, fate = BAD[mutation]
    source_file = "/".join(x for x in (system, case_id, rel) if x)
    mine = [r for r in rejects if r.source_file == source_file]
    assert len(mine) == 1, (source_file, rejects)
    assert words in mine[0].reason
    assert mine[0].case_id == case_id and mine[0].stage == "rvp_candidates"
    row = [r for r in rows if (r["system"], r["case_id"]) == (system, case_id)]
    if fate == "none":
        assert row == []
        return
    assert len(row) == 1
    assert row[0]["ok"] is (fate == "ok")
    if fate == "broken":
        assert row[0]["problem"]
    # Every reject about this candidate's own media is echoed in the row's problem.
    if rel.startswith("steps/"):
        assert Path(rel).name in row[0]["problem"]


def test_broken_video_rows_keep_the_decodable_range(broken) -> None:
    _, chosen, rows, _ = broken
    by_key = {(r["system"], r["case_id"]): r for r in rows}
    full = next(c for c in demo_plan() if c.system == WAN).n_frames
    cut = by_key[chosen["truncated_faststart_mp4"]]
    assert not cut["ok"] and "truncated" in cut["problem"]
    assert 0 < cut["frame_count"] < full and cut["first_frame_s"] == 0.0
    assert cut["last_frame_s"] < cut["duration_s"]  # the file promises more than it holds
    noise = by_key[chosen["random_bytes_mp4"]]
    assert not noise["ok"] and noise["frame_count"] == 0 and noise["last_frame_s"] is None
    assert noise["fingerprint"] == hashlib.sha256(Path(noise["path"]).read_bytes()).hexdigest()


def test_partially_refused_steps_keep_the_rest(broken) -> None:
    _, chosen, rows, _ = broken
    by_key = {(r["system"], r["case_id"]): r for r in rows}
    steps = next(c for c in demo_plan() if c.system == STORYBOARD).step_ids
    assert by_key[chosen["corrupt_step_image"]]["step_ids"] == [s for s in steps if s != "02"]
    assert by_key[chosen["non_numeric_step_names"]]["step_ids"] == list(steps)
    assert by_key[chosen["duplicate_step_number"]]["step_ids"] == list(steps[1:])
    empty = by_key[chosen["empty_steps_folder"]]
    assert empty["step_count"] == 0 and empty["step_ids"] == [] and empty["width"] is None


def test_stray_files_outside_cases_rejected(broken) -> None:
    _, _, _, rejects = broken
    reasons = {r.source_file: r.reason for r in rejects}
    assert "unexpected file at the candidates root" in reasons["README.md"]
    assert "unexpected file in a system folder" in reasons["bad-video/summary.csv"]


def test_nothing_dropped_and_sorted(broken) -> None:
    root, _, rows, rejects = broken
    assert_nothing_dropped(root, rows, rejects)
    assert rows == sorted(rows, key=lambda r: (r["system"], r["case_id"]))
    assert rejects == sorted(rejects, key=lambda r: (r.source_file, r.reason))
    # Same input, same output (nothing depends on listing order or absolute paths in reasons).
    again = scan_candidates(root, KNOWN)
    assert again == (rows, rejects)
    assert not any(str(root) in r.reason for r in rejects)


def test_nothing_dropped_on_demo(demo: Path, demo_scan) -> None:
    assert_nothing_dropped(demo, *demo_scan)
