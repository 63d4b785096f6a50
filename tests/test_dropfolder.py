"""Drop folders: every file hashed once (the file-identity cache), copied into the archive and
the copy hashed, several files at a time, versions never overwritten; an unchanged folder of many
files is only stat'ed."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

from dagster_project.dropfolder import (
    archive_copy,
    archive_versions,
    changed_files,
    escapes,
    file_sha256,
    scan_drop_folder,
    stat_listing,
)
from dagster_project.filecache import Identity


def _counting(calls: list[str]):
    def digest(path: Path) -> str:
        calls.append(path.name)
        return file_sha256(path)

    return digest


def test_the_file_cache_hashes_each_file_once(tmp_path):
    root, cache = tmp_path / "drop", tmp_path / "cache" / "files.sqlite"
    (root / "run").mkdir(parents=True)
    (root / "run" / "a.jsonl").write_text("a\n")
    (root / "b.jsonl").write_text("b\n")
    (root / ".hidden").write_text("x")
    calls: list[str] = []
    first = scan_drop_folder(root, cache, _counting(calls))
    assert first == {"b.jsonl": hashlib.sha256(b"b\n").hexdigest(),
                     "run/a.jsonl": hashlib.sha256(b"a\n").hexdigest()}
    assert sorted(calls) == ["a.jsonl", "b.jsonl"]
    calls.clear()
    assert scan_drop_folder(root, cache, _counting(calls)) == first
    assert calls == []  # nothing changed: nothing read
    (root / "b.jsonl").write_text("changed\n")
    st = (root / "b.jsonl").stat()
    os.utime(root / "b.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    again = scan_drop_folder(root, cache, _counting(calls))
    assert calls == ["b.jsonl"] and again["b.jsonl"] == hashlib.sha256(b"changed\n").hexdigest()
    (root / "run" / "a.jsonl").unlink()  # a file gone: its entry is forgotten
    assert scan_drop_folder(root, cache, _counting(calls)) == {"b.jsonl": again["b.jsonl"]}
    with sqlite3.connect(cache) as con:
        assert [p for (p,) in con.execute("SELECT path FROM entries")] == [
            f"{root}/b.jsonl"]
    cache.write_bytes(b"damaged" * 100)  # a damaged cache costs a re-hash, never a wrong digest
    assert scan_drop_folder(root, cache) == {"b.jsonl": again["b.jsonl"]}


def test_an_unchanged_folder_of_many_files_is_not_read_nor_written(tmp_path):
    """What a sensor tick does every 30 s on a folder of one-record files: stat them, one
    query; no file read, nothing written to the cache."""
    root, cache = tmp_path / "drop", tmp_path / "cache" / "files.sqlite"
    for i in range(3000):
        folder = root / f"run{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:05d}.json").write_text(f'{{"i": {i}}}\n')
    calls: list[str] = []
    first = scan_drop_folder(root, cache, _counting(calls))
    assert len(first) == len(calls) == 3000
    # the database and its write-ahead log (the shared-memory index changes on reads too)
    written = [cache, cache.with_name(cache.name + "-wal")]
    stamps = [p.stat().st_mtime_ns if p.exists() else None for p in written]
    calls.clear()
    assert changed_files(root, json.dumps(first), cache)[0] == []
    assert scan_drop_folder(root, cache, _counting(calls)) == first
    assert calls == []
    assert [p.stat().st_mtime_ns if p.exists() else None for p in written] == stamps


def test_archiving_copies_each_version_once(tmp_path):
    root, archive, home = tmp_path / "drop", tmp_path / "home" / "archive", tmp_path / "home"
    root.mkdir()
    (root / "r.jsonl").write_text("one\n")
    cache = home / "cache" / "files.sqlite"
    versions = archive_versions(archive, root, home / "manifest.parquet", home, cache)
    [v] = versions
    assert Path(v["archived_path"]).read_text() == "one\n"
    assert Path(v["archived_path"]).name == hashlib.sha256(b"one\n").hexdigest()
    assert [p.name for p in archive.iterdir()] == [v["sha256"]]  # no temp file left
    (root / "r.jsonl").write_text("two\n")
    st = (root / "r.jsonl").stat()
    os.utime(root / "r.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    from dagster_project.dropfolder import VERSIONS_SCHEMA
    from dagster_project.tables import rows_to_table, write_table

    write_table(rows_to_table(versions, VERSIONS_SCHEMA), home / "manifest.parquet", home=home)
    later = archive_versions(archive, root, home / "manifest.parquet", home, cache)
    assert [(r["version"], r["is_current"]) for r in later] == [(1, False), (2, True)]
    assert Path(later[0]["archived_path"]).read_text() == "one\n"  # never overwritten


def test_links_leading_out_of_a_drop_folder_are_never_listed_hashed_nor_archived(tmp_path):
    root, home, outside = tmp_path / "drop", tmp_path / "home", tmp_path / "elsewhere"
    (root / "runs" / "r1").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.jsonl").write_text('{"secret": true}\n')
    (root / "a.jsonl").write_text('{"a": 1}\n')
    (root / "alias.jsonl").symlink_to("a.jsonl")  # stays inside: followed
    (root / "latest").symlink_to("runs/r1")  # a folder link that stays inside
    (root / "runs" / "r1" / "step1.jsonl").write_text('{"s": 1}\n')
    (root / "runs" / "r1" / "leak.jsonl").symlink_to(outside / "secret.jsonl")  # nested, out
    (root / "etc").symlink_to("/etc")
    (root / "up").symlink_to("..")  # out through `..`
    archive = home / "archive"
    versions = archive_versions(archive, root, home / "manifest.parquet", home,
                                home / "cache" / "files.sqlite")
    assert sorted(v["source_file"] for v in versions) == [
        "a.jsonl", "alias.jsonl", "latest/step1.jsonl", "runs/r1/step1.jsonl"]
    secret = hashlib.sha256((outside / "secret.jsonl").read_bytes()).hexdigest()
    assert not (archive / secret).exists()  # never copied
    assert set(changed_files(root, None)[0]) == {v["source_file"] for v in versions}
    assert set(stat_listing(root)) == {v["source_file"] for v in versions}
    assert {e.rel: e.reason for e in escapes(root, "JUDGMENTS_DIR")} == {
        "etc": "symbolic link leads outside JUDGMENTS_DIR: etc -> /etc",
        "latest/leak.jsonl": "symbolic link leads outside JUDGMENTS_DIR: latest/leak.jsonl -> "
                             f"{outside / 'secret.jsonl'}",
        "runs/r1/leak.jsonl": "symbolic link leads outside JUDGMENTS_DIR: runs/r1/leak.jsonl -> "
                              f"{outside / 'secret.jsonl'}",
        "up": f"symbolic link leads outside JUDGMENTS_DIR: up -> {tmp_path}",
    }


def test_a_folder_hashed_and_archived_several_files_at_a_time_keeps_every_byte(tmp_path):
    """The first scan of a campaign folder (files of several MB among small ones, hashed and
    copied by threads): each listed with the sha256 of its bytes, in path order; archived under
    that name with the same bytes, whether the scan archives it (not known yet) or the archive
    copies what the folder's observation hashed (known to the stat cache, not archived)."""
    root, home = tmp_path / "drop", tmp_path / "home"
    sizes = [0, 1, 3 * (1 << 20) + 17, 100, (1 << 20), 5 * (1 << 20) + 3, 7, 2 * (1 << 20)]
    files = {}
    for i, size in enumerate(sizes * 3):
        data = hashlib.sha256(str(i).encode()).digest() * (size // 32 + 1)
        files[f"run{i % 4}/{i:03d}.jsonl"] = data[:size]
        (root / f"run{i % 4}").mkdir(parents=True, exist_ok=True)
        (root / f"run{i % 4}" / f"{i:03d}.jsonl").write_bytes(data[:size])
    expected = {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(files.items())}
    observed = scan_drop_folder(root, home / "cache" / "observed.sqlite")
    assert list(observed.items()) == list(expected.items())
    for cache in ("observed.sqlite", "fresh.sqlite"):  # known to the cache, then not
        archive = home / cache / "archive"
        versions = archive_versions(archive, root, home / cache / "manifest.parquet", home,
                                    home / "cache" / cache)
        assert {v["source_file"]: v["sha256"] for v in versions} == expected
        for v in versions:
            held = Path(v["archived_path"])
            assert held.read_bytes() == files[v["source_file"]]
            assert held.name == v["sha256"] and v["size_bytes"] == len(files[v["source_file"]])
        assert sorted(p.name for p in archive.iterdir()) == sorted(set(expected.values()))


def test_an_archive_copy_trusts_a_recorded_digest_only_while_the_file_keeps_its_identity(
        tmp_path):
    """The stat cache's rule: the digest recorded for a file's identity (size, mtime, inode)
    names its copy without a second read; a file whose identity is not the recorded one (it
    changed after the observation hashed it, or during the copy) is named by its copy's bytes."""
    src, archive = tmp_path / "r.jsonl", tmp_path / "archive"
    data = b"now\n" * (1 << 19)  # 2 MB: a copy by the kernel (a smaller file is read once)
    src.write_bytes(data)
    now = Identity.of(src.stat())
    recorded = "f" * 64  # what a cache recorded for this identity: taken as is
    assert archive_copy(src, archive, (now, recorded)) == recorded
    assert (archive / recorded).read_bytes() == data
    before = now._replace(mtime_ns=now.mtime_ns - 1)  # recorded for an earlier state
    sha = hashlib.sha256(data).hexdigest()
    assert archive_copy(src, archive, (before, recorded)) == sha
    assert archive_copy(src, archive) == sha and (archive / sha).read_bytes() == data
    assert sorted(p.name for p in archive.iterdir()) == sorted([recorded, sha])  # no temp left
