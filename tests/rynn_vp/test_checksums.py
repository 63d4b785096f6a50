from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dagster_project.rynn_vp.checksums import (
    FileStatus,
    ManifestError,
    hash_files,
    hash_progress_bar,
    parse_sha256sums,
    verify_snapshot,
)

SPACED = "cases/source1_1-Home Office-Room_01-Task_01-Variant_01-001/gt.mp4"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _make_tree(root: Path) -> dict[str, bytes]:
    """A small snapshot: a spaced path, an empty file, and a file spanning several chunks."""
    files = {
        SPACED: b"fake mp4 bytes" * 1000,
        "empty.txt": b"",
        "meta/index.json": b'{"a": 1}\n',
        "big.bin": os.urandom(300_000),
    }
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def _write_manifest(root: Path, files: dict[str, bytes], name: str = "SHA256SUMS.txt") -> Path:
    lines = [f"{_sha(data)}  {rel}\n" for rel, data in sorted(files.items())]
    path = root / name
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _by_path(statuses: list[FileStatus]) -> dict[str, FileStatus]:
    return {s.rel_path: s for s in statuses}


# --------------------------------------------------------------------------- parsing


def test_parse_accepts_binary_marker_crlf_and_uppercase(tmp_path: Path) -> None:
    d1, d2 = _sha(b"one"), _sha(b"two")
    manifest = tmp_path / "SHA256SUMS.txt"
    manifest.write_bytes(f"{d1.upper()}  a dir/one file.txt\r\n{d2} *two.bin\r\n\r\n".encode())
    entries, problems = parse_sha256sums(manifest)
    assert problems == []
    assert entries == {"a dir/one file.txt": d1, "two.bin": d2}


def test_parse_gnu_escaped_name_and_dot_slash(tmp_path: Path) -> None:
    d = _sha(b"x")
    manifest = tmp_path / "SHA256SUMS.txt"
    manifest.write_text(f"\\{d}  we\\\\ird\\nname\n{d}  ./sub/file\n", encoding="utf-8")
    entries, problems = parse_sha256sums(manifest)
    assert problems == []
    assert entries == {"we\\ird\nname": d, "sub/file": d}


def test_parse_reports_malformed_lines_with_numbers(tmp_path: Path) -> None:
    d = _sha(b"ok")
    manifest = tmp_path / "SHA256SUMS.txt"
    manifest.write_text(
        "\n".join(
            [
                f"{d}  good.txt",  # 1
                "not a checksum line",  # 2
                f"{d[:-1]}  short.txt",  # 3: 63 hex digits
                f"{d}  ../escape.txt",  # 4: path traversal
                f"{d}  good.txt",  # 5: identical duplicate is harmless
                f"{_sha(b'other')}  good.txt",  # 6: conflicting duplicate
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    entries, problems = parse_sha256sums(manifest)
    assert entries == {"good.txt": d}  # first digest wins
    assert [p.line_no for p in problems] == [2, 3, 4, 6]
    assert problems[0].text == "not a checksum line"
    assert "duplicate" in problems[3].reason
    assert all(p.reason for p in problems)


def test_missing_manifest_raises_naming_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "SHA256SUMS.txt"
    with pytest.raises(ManifestError, match="SHA256SUMS.txt") as excinfo:
        parse_sha256sums(missing)
    assert excinfo.value.path == missing
    assert str(missing) in str(excinfo.value)

    with pytest.raises(ManifestError):
        verify_snapshot(tmp_path)


def test_unreadable_manifest_raises(tmp_path: Path) -> None:
    (tmp_path / "SHA256SUMS.txt").mkdir()  # reading a directory fails even as root
    with pytest.raises(ManifestError, match="SHA256SUMS.txt"):
        parse_sha256sums(tmp_path / "SHA256SUMS.txt")


# --------------------------------------------------------------------------- hashing


def test_hash_files_matches_hashlib(tmp_path: Path) -> None:
    files = _make_tree(tmp_path)
    got = hash_files(tmp_path, list(files), chunk_size=4096)
    assert got == {rel: _sha(data) for rel, data in files.items()}
    assert got["empty.txt"] == _sha(b"")


def test_hash_files_missing_or_unreadable_is_none(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "f").write_bytes(b"f")
    got = hash_files(tmp_path, ["f", "absent", "adir"])
    assert got == {"f": _sha(b"f"), "absent": None, "adir": None}


def test_parallel_equals_serial(tmp_path: Path) -> None:
    files = {f"d/f{i:02d}.bin": os.urandom(1000 * i + 7) for i in range(20)}
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    rels = sorted(files)
    serial = hash_files(tmp_path, rels, workers=1, chunk_size=1024)
    parallel = hash_files(tmp_path, rels, workers=4, chunk_size=1024)
    assert serial == parallel == {rel: _sha(files[rel]) for rel in rels}
    assert list(parallel) == rels  # result keeps the caller's order


@pytest.mark.parametrize("workers", [1, 3])
def test_progress_receives_exact_total(tmp_path: Path, workers: int) -> None:
    files = _make_tree(tmp_path)
    seen: list[int] = []
    hash_files(tmp_path, list(files), workers=workers, chunk_size=1000, progress=seen.append)
    assert sum(seen) == sum(len(d) for d in files.values())
    assert all(n > 0 for n in seen)


def test_hash_progress_bar_counts_bytes(tmp_path: Path) -> None:
    files = _make_tree(tmp_path)
    total = sum(len(d) for d in files.values())
    with hash_progress_bar(total, disable=False) as progress:
        hash_files(tmp_path, list(files), progress=progress)
        bar = progress.__self__  # bound tqdm.update
        assert bar.n == total


# --------------------------------------------------------------------------- verification


def test_verify_all_ok(tmp_path: Path) -> None:
    files = _make_tree(tmp_path)
    _write_manifest(tmp_path, files)
    seen: list[int] = []
    result = verify_snapshot(tmp_path, progress=seen.append)
    assert [s.rel_path for s in result] == sorted(files)
    assert {s.status for s in result} == {"ok"}
    s = _by_path(result)[SPACED]
    assert s.size_bytes == len(files[SPACED])
    assert s.expected_sha256 == s.actual_sha256 == _sha(files[SPACED])
    assert sum(seen) == sum(len(d) for d in files.values())


def test_verify_statuses(tmp_path: Path) -> None:
    files = _make_tree(tmp_path)
    listed = dict(files)
    listed["gone.txt"] = b"was here"
    listed["videos/later.mp4"] = b"large video"
    _write_manifest(tmp_path, listed)

    (tmp_path / "meta/index.json").write_bytes(b"tampered")
    (tmp_path / "extra.txt").write_bytes(b"surprise")
    # huggingface_hub's local_dir metadata must not show up as unlisted.
    (tmp_path / ".cache/huggingface/download").mkdir(parents=True)
    (tmp_path / ".cache/huggingface/download/x.metadata").write_bytes(b"meta")

    result = verify_snapshot(tmp_path, absent_ok=lambda rel: rel.startswith("videos/"), workers=2)
    by = _by_path(result)
    assert [s.rel_path for s in result] == sorted(by)
    assert {rel: s.status for rel, s in by.items()} == {
        SPACED: "ok",
        "big.bin": "ok",
        "empty.txt": "ok",
        "extra.txt": "unlisted",
        "gone.txt": "missing",
        "meta/index.json": "mismatch",
        "videos/later.mp4": "not_downloaded",
    }
    assert by["meta/index.json"].actual_sha256 == _sha(b"tampered")
    assert by["meta/index.json"].expected_sha256 == _sha(files["meta/index.json"])
    assert by["gone.txt"] == FileStatus("gone.txt", None, _sha(b"was here"), None, "missing")
    assert by["extra.txt"] == FileStatus("extra.txt", 8, None, None, "unlisted")


def test_verify_custom_ignore_and_manifest_name(tmp_path: Path) -> None:
    files = {"a.txt": b"a"}
    (tmp_path / "a.txt").write_bytes(b"a")
    (tmp_path / "notes.md").write_bytes(b"n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden/x").write_bytes(b"x")
    _write_manifest(tmp_path, files, name="CHECKSUMS")

    result = verify_snapshot(
        tmp_path, manifest_name="CHECKSUMS", ignore=lambda rel: rel.endswith(".md")
    )
    assert {s.rel_path: s.status for s in result} == {"a.txt": "ok", ".hidden/x": "unlisted"}


def test_verify_reports_manifest_problems(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")
    (tmp_path / "SHA256SUMS.txt").write_text(f"{_sha(b'a')}  a.txt\ngarbage\n")
    problems = []
    result = verify_snapshot(tmp_path, on_problem=problems.append)
    assert [s.status for s in result] == ["ok"]
    assert [(p.line_no, p.text) for p in problems] == [(2, "garbage")]


# --------------------------------------------------------------------------- GNU cross-check


def test_cross_check_with_gnu_sha256sum(tmp_path: Path) -> None:
    # coreutils is on every machine this runs on; without it the oracle is missing
    assert shutil.which("sha256sum"), "GNU sha256sum (coreutils) is not installed"
    files = _make_tree(tmp_path)
    rels = sorted(files)

    # GNU writes the manifest, we verify it.
    gnu = subprocess.run(["sha256sum", "--", *rels], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "SHA256SUMS.txt").write_bytes(gnu.stdout)
    assert {s.status for s in verify_snapshot(tmp_path)} == {"ok"}

    # We write the manifest, GNU verifies it.
    ours = hash_files(tmp_path, rels)
    (tmp_path / "SHA256SUMS.txt").write_text("".join(f"{ours[r]}  {r}\n" for r in rels))
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS.txt"], cwd=tmp_path, check=True)

    # Both flag the same corrupted file.
    (tmp_path / SPACED).write_bytes(b"corrupted")
    proc = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS.txt"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode != 0
    gnu_failed = {
        line.rsplit(": ", 1)[0] for line in proc.stdout.splitlines() if line.endswith("FAILED")
    }
    ours_failed = {s.rel_path for s in verify_snapshot(tmp_path) if s.status != "ok"}
    assert gnu_failed == ours_failed == {SPACED}
