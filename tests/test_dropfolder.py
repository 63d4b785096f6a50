"""Drop folders: every file hashed once (the stat cache), copied into the archive and hashed in
the same read, versions never overwritten."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from dagster_project.dropfolder import archive_versions, file_sha256, scan_drop_folder


def _counting(calls: list[str]):
    def digest(path: Path) -> str:
        calls.append(path.name)
        return file_sha256(path)

    return digest


def test_the_stat_cache_hashes_each_file_once(tmp_path):
    root, cache = tmp_path / "drop", tmp_path / "cache" / "stat.json"
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
    cache.write_text("{not json")  # a damaged cache costs a re-hash, never a wrong digest
    assert scan_drop_folder(root, cache) == again


def test_archiving_copies_each_version_once(tmp_path):
    root, archive, home = tmp_path / "drop", tmp_path / "home" / "archive", tmp_path / "home"
    root.mkdir()
    (root / "r.jsonl").write_text("one\n")
    cache = home / "cache" / "stat.json"
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
