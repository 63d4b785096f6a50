"""Roots are walls: nothing outside a configured root is opened, hashed, probed or listed. Real
files and real symbolic links in temp folders, read by the real walkers (`roots.Root`, the
candidates scan, the snapshot ingestion assets); a link that stays inside is followed, one that
leaves is refused with a reason naming it, and nothing behind it is ever listed."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchlake_demo.rynn_vp import write_sha256sums
from dagster_project.media.probe import probe_video
from dagster_project.roots import OutsideRoot, Root
from dagster_project.runner import materialize
from dagster_project.rynn_vp.candidates import scan_candidates
from dagster_project.rynn_vp.checksums import parse_sha256sums, verify_snapshot
from dagster_project.warehouse.catalog import connect
from tests.conftest import RVP_INGEST, settings_for

ETC = Path("/etc")
ETC_NAMES = {p.name for p in ETC.iterdir()}


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Every folder listed (os.scandir, os.listdir) while the test runs, resolved."""
    seen: list[Path] = []
    scandir, listdir = os.scandir, os.listdir

    def spy_scandir(path=".", *args):
        seen.append(Path(os.path.realpath(path)))
        return scandir(path, *args)

    def spy_listdir(path=".", *args):
        seen.append(Path(os.path.realpath(path)))
        return listdir(path, *args)

    monkeypatch.setattr(os, "scandir", spy_scandir)
    monkeypatch.setattr(os, "listdir", spy_listdir)
    yield seen


def assert_nothing_listed_under(seen: list[Path], outside: Path) -> None:
    bad = [p for p in seen if p.is_relative_to(outside)]
    assert bad == [], f"listed outside the root: {bad[:5]}"


# --- the helper --------------------------------------------------------------------------------


def test_join_refuses_names_that_leave(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("inside\n")
    (root / "out").symlink_to(ETC)
    walls = Root(root, "CANDIDATES_DIR")
    assert walls.join("a/f.txt") == root / "a" / "f.txt"
    for name in ("../root/a/f.txt", "a/../../x", "/etc/passwd", ""):
        with pytest.raises(OutsideRoot, match="leads outside CANDIDATES_DIR"):
            walls.join(name)
    with pytest.raises(OutsideRoot, match=r"symbolic link leads outside CANDIDATES_DIR: out -> /etc$"):
        walls.join("out/passwd")


def test_walk_follows_inside_links_and_stops_at_links_out_at_any_depth(
        tmp_path: Path, listed: list[Path]) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "a" / "b").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "a" / "b" / "real.txt").write_text("x")
    (elsewhere / "secret.txt").write_text("s")
    (root / "a" / "b" / "etc").symlink_to(ETC)  # nested, to a system folder
    (root / "a" / "b" / "secret.txt").symlink_to(elsewhere / "secret.txt")  # a file link out
    (root / "a" / "dots").symlink_to("../../elsewhere")  # relative, out through `..`
    (root / "inside").symlink_to("a/b")  # stays inside: followed
    (root / "a" / "loop").symlink_to(root)  # back to the root: walked once, no loop
    listed.clear()
    walk = Root(root, "JUDGMENTS_DIR").walk()
    assert set(walk.files) == {"a/b/real.txt", "inside/real.txt"}  # the loop walked once
    leaves = "symbolic link leads outside JUDGMENTS_DIR"
    assert {e.rel: e.reason for e in walk.escapes} == {
        "a/b/etc": f"{leaves}: a/b/etc -> /etc",
        "a/b/secret.txt": f"{leaves}: a/b/secret.txt -> {elsewhere / 'secret.txt'}",
        "a/dots": f"{leaves}: a/dots -> {elsewhere}",
        # the same links seen through the folder link that stays inside
        "inside/etc": f"{leaves}: inside/etc -> /etc",
        "inside/secret.txt": f"{leaves}: inside/secret.txt -> {elsewhere / 'secret.txt'}",
    }
    assert_nothing_listed_under(listed, ETC)
    assert_nothing_listed_under(listed, elsewhere)


# --- candidates --------------------------------------------------------------------------------


@pytest.fixture
def candidates(demo_inputs, tmp_path: Path) -> tuple[Path, Path, str, list[str]]:
    """A CANDIDATES_DIR holding one video system of the demo, and a folder beside it (outside)
    holding another system; (root, outside, system, its case ids)."""
    demo = demo_inputs.candidates_root()
    systems = sorted(p.name for p in demo.iterdir()
                     if p.is_dir() and any(p.glob("*/candidate.mp4")))
    root, outside = tmp_path / "candidates", tmp_path / "elsewhere"
    shutil.copytree(demo / systems[0], root / systems[0])
    shutil.copytree(demo / systems[1], outside / systems[1])
    cases = sorted(p.name for p in (root / systems[0]).iterdir())
    return root, outside, systems[0], cases


def test_candidate_links_out_are_refused_and_never_read(candidates, listed) -> None:
    root, outside, system, cases = candidates
    other = next(p for p in outside.iterdir())
    (root / "linked-system").symlink_to(other)  # a system folder elsewhere
    (root / "etc").symlink_to(ETC)  # a system folder that is /etc
    video = root / system / cases[0] / "candidate.mp4"
    video.unlink()  # the candidate itself is a link to a video elsewhere
    video.symlink_to(next(other.glob("*/candidate.mp4")))
    extra = root / system / cases[1] / "extra"
    extra.mkdir()
    (extra / "etc").symlink_to(ETC)  # nested: inside an unexpected folder
    listed.clear()  # what the scan lists, not the set-up
    rows, rejects = scan_candidates(root, None)
    by_file = {r.source_file: r.reason for r in rejects}
    assert by_file["linked-system"] == f"symbolic link leads outside CANDIDATES_DIR: linked-system -> {other}"
    assert by_file["etc"] == "symbolic link leads outside CANDIDATES_DIR: etc -> /etc"
    assert by_file[f"{system}/{cases[0]}/candidate.mp4"].startswith(
        f"symbolic link leads outside CANDIDATES_DIR: {system}/{cases[0]}/candidate.mp4 -> {outside}")
    # the unexpected folder is refused with its own files only (the link out counts none)
    assert "(0 file(s) inside)" in by_file[f"{system}/{cases[1]}/extra"]
    # no row for what lies outside; no reject names anything under /etc
    assert {r["system"] for r in rows} == {system}
    assert cases[0] not in {r["case_id"] for r in rows}
    for r in rejects:
        assert not r.source_file.startswith("etc/") and "/etc/" not in r.source_file
        assert not set(Path(r.source_file).parts) & (ETC_NAMES - {"etc"})
    assert all(Path(r["path"]).is_relative_to(root) for r in rows)
    assert_nothing_listed_under(listed, ETC)
    assert_nothing_listed_under(listed, outside)


def test_a_candidate_link_that_stays_inside_is_followed(candidates) -> None:
    root, _, system, cases = candidates
    (root / "mirror").symlink_to(system)  # a second system name for the same folder
    video = root / system / cases[0] / "candidate.mp4"
    rows0, _ = scan_candidates(root, None)
    (root / "store").mkdir()
    shutil.move(video, root / "store" / "v.mp4")
    video.symlink_to("../../store/v.mp4")  # relative, inside the root
    rows, rejects = scan_candidates(root, None)
    mirrored = {r["case_id"]: r for r in rows if r["system"] == "mirror"}
    assert set(mirrored) == set(cases) and all(r["ok"] for r in mirrored.values())
    linked = next(r for r in rows if (r["system"], r["case_id"]) == (system, cases[0]))
    before = next(r for r in rows0 if (r["system"], r["case_id"]) == (system, cases[0]))
    assert linked["ok"] and linked["fingerprint"] == before["fingerprint"]
    assert not any("symbolic link" in r.reason for r in rejects)
    assert [r.source_file for r in rejects] == ["store/v.mp4"]  # "store" is no system


# --- what is not a video says what it is -----------------------------------------------------


@pytest.mark.parametrize(("content", "words"), [
    (b"this is not a video, just a note\n", "not a video: text file (starts 'this is not a video"),
    (b"", "not a video: empty file (0 bytes)"),
    (None, "not a video: PNG image"),
])
def test_a_non_video_candidate_says_what_it_is(candidates, demo_inputs, content, words) -> None:
    root, _, system, cases = candidates
    video = root / system / cases[0] / "candidate.mp4"
    if content is None:
        png = next(demo_inputs.candidates_root().glob("*/*/steps/*.png"))
        shutil.copy(png, video)
    else:
        video.write_bytes(content)
    rows, rejects = scan_candidates(root, None)
    reason = next(r.reason for r in rejects
                  if r.source_file == f"{system}/{cases[0]}/candidate.mp4")
    assert reason == f"video probe failed: {words}" or reason.startswith(
        f"video probe failed: {words}")
    row = next(r for r in rows if r["case_id"] == cases[0])
    assert not row["ok"] and words in row["problem"]


def test_a_damaged_real_video_keeps_ffmpegs_reason(candidates) -> None:
    root, _, system, cases = candidates
    video = root / system / cases[0] / "candidate.mp4"
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 2])
    probe = probe_video(video)
    assert not probe.ok and probe.error == "cannot open: moov atom not found"


# --- the snapshot ------------------------------------------------------------------------------


@pytest.mark.slow
def test_snapshot_links_out_are_refused_and_inside_links_followed(
        rynn_vp_copy: Path, tmp_path: Path, listed: list[Path]) -> None:
    root = rynn_vp_copy
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    cases = sorted(p.name for p in (root / "cases").iterdir())
    linked, nested, inner, text = cases[0], cases[1], cases[2], cases[3]
    # a GT video that is a text file (listed with its checksum: only the probe refuses it)
    (root / "cases" / text / "gt.mp4").write_text("gt video to follow\n")
    write_sha256sums(root)  # before any link: the manifest lists the snapshot as it was
    # a case folder linked to a valid case elsewhere (listed in SHA256SUMS.txt as it was)
    shutil.move(root / "cases" / linked, outside / linked)
    (root / "cases" / linked).symlink_to(outside / linked)
    # a nested link: one file of a case is a link to its copy elsewhere
    gt = root / "cases" / nested / "gt.mp4"
    shutil.move(gt, outside / "gt.mp4")
    gt.symlink_to(outside / "gt.mp4")
    # a link to /etc among the cases
    (root / "cases" / "etc").symlink_to(ETC)
    # a link that stays inside: followed, the case accepted
    png = root / "cases" / inner / "initial.png"
    (root / "shared").mkdir()
    shutil.move(png, root / "shared" / "initial.png")
    png.symlink_to("../../shared/initial.png")
    # `..` and an absolute path in SHA256SUMS.txt entries
    sums = root / "SHA256SUMS.txt"
    sums.write_text(sums.read_text() + f"{'0' * 64}  ../elsewhere/gt.mp4\n"
                    f"{'0' * 64}  /etc/passwd\n")

    settings = settings_for(tmp_path / "home", rynn_vp_source=str(root))
    listed.clear()
    result = materialize(settings, RVP_INGEST, raise_on_error=False)
    seen = list(listed)
    con = connect(settings.home)
    accepted = {r[0] for r in con.execute("SELECT case_id FROM rvp_cases").fetchall()}
    assert inner in accepted
    assert linked not in accepted and nested not in accepted
    probed = {r[0] for r in con.execute(
        "SELECT case_id FROM rvp_media WHERE codec IS NOT NULL").fetchall()}
    assert inner in probed
    assert linked not in probed and nested not in probed  # their videos never probed
    rejects = con.execute("SELECT source_file, case_id, reason FROM rvp_rejects").fetchall()
    leaves = "symbolic link leads outside RYNN_VP_SOURCE"
    assert (f"cases/{linked}", linked, f"{leaves}: cases/{linked} -> {outside / linked}") \
        in rejects
    assert any(src == f"cases/{nested}/gt.mp4" and reason == (
        f"{leaves}: cases/{nested}/gt.mp4 -> {outside / 'gt.mp4'}")
        for src, _, reason in rejects)
    assert any(src == "cases/etc" and reason == f"{leaves}: cases/etc -> /etc"
               for src, _, reason in rejects)
    assert not any(src.startswith("cases/etc/") for src, _, _ in rejects)
    assert (f"cases/{text}/gt.mp4", text, "video probe failed: not a video: text file "
            "(starts 'gt video to follow')") in rejects
    assert text not in accepted
    manifest = [reason for src, _, reason in rejects if src == "SHA256SUMS.txt"]
    assert sum("'..'" in r and "elsewhere/gt.mp4" in r for r in manifest) == 1
    assert sum("absolute" in r and "/etc/passwd" in r for r in manifest) == 1
    # checksums: the moved case's listed files are missing here, not hashed elsewhere
    hashed = con.execute("SELECT rel_path, status, actual_sha256 FROM stg_rvp_checksums "
                         f"WHERE case_id IN ('{linked}', '{nested}')").fetchall()
    assert all(sha is None for path, _, sha in hashed if path.startswith(f"cases/{linked}/")
               or path == f"cases/{nested}/gt.mp4")
    assert result.success
    assert_nothing_listed_under(seen, ETC)
    assert_nothing_listed_under(seen, outside)


def test_manifest_and_names_read_from_it_stay_inside(rynn_vp_copy: Path, tmp_path: Path) -> None:
    root = rynn_vp_copy
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    sums = root / "SHA256SUMS.txt"
    entries, _ = parse_sha256sums(sums)
    (root / "notes").symlink_to(tmp_path)  # a folder link out
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    sums.write_text(sums.read_text() + f"{digest}  notes/secret.txt\n")
    statuses = {s.rel_path: s for s in verify_snapshot(root)}
    behind = statuses["notes/secret.txt"]
    assert behind.status == "missing" and behind.actual_sha256 is None  # never hashed
    assert behind.problem == f"symbolic link leads outside RYNN_VP_SOURCE: notes -> {tmp_path}"
    assert "notes" not in statuses  # said once, by the listed file behind it
    assert len([s for s in statuses.values() if s.status == "ok"]) == len(entries)


# --- drop folders, through the judgment ingestion ----------------------------------------------


@pytest.mark.slow
def test_judgment_links_leading_out_are_rejects_and_never_read(demo_warehouse, tmp_path) -> None:
    from tests.rynn_vp.test_judging_assets import JUDGING, JUDGING_VIEWS

    home, drop, outside = tmp_path / "home", tmp_path / "judgments", tmp_path / "elsewhere"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster", ".built"))
    shutil.copytree(demo_warehouse.judgments_root(), drop)
    outside.mkdir()
    record = next(p for p in sorted(drop.glob("*.jsonl"))).read_text().splitlines()[0]
    (outside / "secret.jsonl").write_text(record + "\n")  # a valid record, but elsewhere
    (drop / "leak.jsonl").symlink_to(outside / "secret.jsonl")
    (drop / "etc").symlink_to(ETC)
    settings = settings_for(home, judgments_dir=str(drop))
    assert materialize(settings, f"{JUDGING} or {JUDGING_VIEWS}", checks=False).success
    con = connect(settings.home)
    rejects = dict(con.execute("SELECT source_file, reason FROM rvp_judgment_rejects "
                               "WHERE reason LIKE 'symbolic link%'").fetchall())
    assert rejects == {
        "etc": "symbolic link leads outside JUDGMENTS_DIR: etc -> /etc",
        "leak.jsonl": f"symbolic link leads outside JUDGMENTS_DIR: leak.jsonl -> "
                      f"{outside / 'secret.jsonl'}"}
    files = {r[0] for r in con.execute("SELECT source_file FROM rvp_judgment_files").fetchall()}
    assert "leak.jsonl" not in files and not any(f.startswith("etc/") for f in files)
    assert con.execute("SELECT count(*) FROM rvp_judgments WHERE source_file = 'leak.jsonl'"
                       ).fetchone() == (0,)
