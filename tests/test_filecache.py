"""The file-identity cache: a hit for an unchanged file, a miss once the file is touched or the
computation's version changes, several processes writing at once, and a damaged cache costing
only recomputation."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from dagster_project.filecache import FileCache, Identity, remembered


def _counting(calls: list[str]):
    def compute(path: Path) -> dict:
        calls.append(path.name)
        return {"size": path.stat().st_size, "text": path.read_text()}

    return compute


def test_a_hit_until_the_file_or_the_version_changes(tmp_path):
    cache, f = tmp_path / "cache" / "files.sqlite", tmp_path / "a.txt"
    f.write_text("one")
    calls: list[str] = []
    first = remembered(f, cache, "probe", "1", _counting(calls))
    assert remembered(f, cache, "probe", "1", _counting(calls)) == first
    assert calls == ["a.txt"]  # the second call read nothing
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched: same bytes
    remembered(f, cache, "probe", "1", _counting(calls))
    assert calls == ["a.txt", "a.txt"]
    remembered(f, cache, "probe", "2", _counting(calls))  # a new version of the computation
    assert len(calls) == 3
    remembered(f, cache, "other", "2", _counting(calls))  # another kind of value
    assert len(calls) == 4
    remembered(f, cache, "probe", "2", _counting(calls))
    assert len(calls) == 4
    assert remembered(f, None, "probe", "2", _counting(calls)) == first  # no cache: computed
    assert len(calls) == 5


def test_a_damaged_cache_only_costs_recomputation(tmp_path):
    cache, f = tmp_path / "files.sqlite", tmp_path / "a.txt"
    f.write_text("one")
    cache.write_bytes(b"not a database" * 100)
    calls: list[str] = []
    assert remembered(f, cache, "probe", "1", _counting(calls))["text"] == "one"
    assert remembered(f, cache, "probe", "1", _counting(calls))["text"] == "one"
    assert len(calls) == 2


def _writer(args: tuple[str, int]) -> list[tuple[str, int]]:
    """One process: remember a value for each of the shared files (each process its own kind)
    and return what it was given back on a second look."""
    cache, n = args
    folder = Path(cache).parent / "files"
    out = []
    for path in sorted(folder.iterdir()):
        remembered(path, Path(cache), f"kind{n}", "1", lambda p: p.stat().st_size * 10 + n)
    for path in sorted(folder.iterdir()):
        out.append((path.name, remembered(path, Path(cache), f"kind{n}", "1", lambda p: -1)))
    return out


def test_concurrent_writers(tmp_path):
    cache = tmp_path / "files.sqlite"
    folder = tmp_path / "files"
    folder.mkdir()
    for i in range(200):
        (folder / f"{i:03d}.txt").write_text("x" * i)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_writer, [(str(cache), n) for n in range(8)])
    for n, got in enumerate(results):  # every process saw its own values back, none lost
        assert got == [(f"{i:03d}.txt", i * 10 + n) for i in range(200)]
    store = FileCache(cache)
    idents = {str(p): Identity.of(p.stat()) for p in folder.iterdir()}
    for n in range(8):
        hits, gone = store.lookup_under(f"kind{n}", "1", str(folder), idents)
        assert len(hits) == 200 and gone == []
