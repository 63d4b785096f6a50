"""What was computed from a file, remembered per file identity, so an unchanged file is not read
again: a content digest (drop-folder files, candidates), a video probe (GT, candidates, val
videos). One SQLite file, `$BENCHLAKE_HOME/cache/files.sqlite`, holds every entry: per (kind,
absolute path) the version of the computation, the file's size, mtime_ns and inode when it was
computed, and the value. An entry counts only while all of these still match, so a touched file
or a new version of the computation computes again (and replaces the entry: one per file).

Several processes share it (sensor ticks, run steps, pool workers): WAL journal, a busy timeout
and a retry. It only saves work: deleting it, or a damaged or unwritable file (then nothing is
remembered), costs computations again; a file changed in place with the same size and mtime
(which tools that keep mtimes do not do) is the one thing it cannot see.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")
CACHE_FILE = "files.sqlite"
# The content digest every user shares (drop-folder hashing, candidate fingerprints).
DIGEST_KIND, DIGEST_VERSION = "sha256", "1"
_RETRIES = 5
_SCHEMA = """CREATE TABLE IF NOT EXISTS entries (
    kind TEXT NOT NULL, path TEXT NOT NULL, version TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, inode INTEGER NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (kind, path)) WITHOUT ROWID"""


class Identity(NamedTuple):
    """What tells a file's bytes changed without reading them."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> Identity:
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


_local = threading.local()  # sqlite3 connections belong to one thread (and one process)


class FileCache:
    """The cache in the SQLite file `path` (created on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _connection(self) -> sqlite3.Connection:
        cache: dict = _local.__dict__.setdefault("connections", {})
        key = (str(self.path), os.getpid())  # a forked child opens its own
        con = cache.get(key)
        if con is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            # WAL: readers never wait for a writer; NORMAL sync: a cache needs no fsync per
            # write (a lost entry is a recomputation).
            _retry(lambda: con.execute("PRAGMA journal_mode=WAL"))
            con.execute("PRAGMA synchronous=NORMAL")
            _retry(lambda: con.execute(_SCHEMA))
            cache[key] = con
        return con

    def lookup(self, kind: str, version: str, files: Mapping[str, Identity]) -> dict[str, Any]:
        """{path: value} of the `files` (absolute path → identity now) whose entry holds."""
        def run() -> dict[str, Any]:
            con = self._connection()
            found = [row for p in files for row in con.execute(
                "SELECT path, version, size, mtime_ns, inode, value FROM entries "
                "WHERE kind = ? AND path = ?", (kind, p)).fetchall()]
            return _holding(found, version, files)

        return _guarded(run, {})

    def lookup_under(self, kind: str, version: str, folder: str,
                     files: Mapping[str, Identity]) -> tuple[dict[str, Any], list[str]]:
        """`lookup` for the files of one folder in one range query (a drop folder of many
        thousand files), and the paths of entries under it whose file is gone."""
        prefix = folder.rstrip("/") + "/"

        def run() -> tuple[dict[str, Any], list[str]]:
            found = self._connection().execute(
                "SELECT path, version, size, mtime_ns, inode, value FROM entries "
                "WHERE kind = ? AND path >= ? AND path < ?",
                (kind, prefix, prefix[:-1] + "0")).fetchall()  # "0" is the byte after "/"
            return _holding(found, version, files), [r[0] for r in found if r[0] not in files]

        return _guarded(run, ({}, []))

    def store(self, kind: str, version: str, entries: Iterable[tuple[str, Identity, Any]],
              forget: Iterable[str] = ()) -> None:
        """Remember each (absolute path, identity when computed, JSON-able value), and drop
        the entries of the paths in `forget`; one transaction, none when there is nothing."""
        rows = [(kind, p, version, *ident, json.dumps(v)) for p, ident, v in entries]
        gone = [(kind, p) for p in forget]
        if not rows and not gone:
            return

        def run() -> None:
            con = self._connection()
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)",
                                rows)
                con.executemany("DELETE FROM entries WHERE kind = ? AND path = ?", gone)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

        _guarded(run, None)


def _holding(found: list[tuple], version: str, files: Mapping[str, Identity]
             ) -> dict[str, Any]:
    hits = [(p, value) for p, ver, size, mtime, inode, value in found
            if ver == version and files.get(p) == (size, mtime, inode)]
    # one JSON document for all the values: a folder of 60,000 files decodes in one call
    values = json.loads("[" + ",".join(value for _, value in hits) + "]")
    return {p: v for (p, _), v in zip(hits, values, strict=True)}


def _retry(op: Callable[[], T]) -> T:
    """`op`, again after a pause while another process holds the database (beyond the busy
    timeout: WAL set-up and BEGIN IMMEDIATE can still report "locked")."""
    for attempt in range(_RETRIES):
        try:
            return op()
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if attempt == _RETRIES - 1 or ("locked" not in text and "busy" not in text):
                raise
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")


def _guarded(op: Callable[[], T], default: T) -> T:
    """`op` with retries; a cache that cannot be used (damaged, read-only) is no cache."""
    try:
        return _retry(op)
    except sqlite3.DatabaseError:
        return default


def remembered(path: Path, cache: Path | None, kind: str, version: str,
               compute: Callable[[Path], T], to_json: Callable[[T], Any] = lambda v: v,
               from_json: Callable[[Any], T] = lambda v: v) -> T:
    """`compute(path)`, or what it gave before for this file as it is now. `cache`: the SQLite
    file (`Settings.file_cache`); None computes every time."""
    if cache is None:
        return compute(path)
    try:
        ident = Identity.of(os.stat(path))
    except OSError:
        return compute(path)  # let the computation say what is wrong with the file
    absolute = os.path.abspath(path)
    store = FileCache(cache)
    hit = store.lookup(kind, version, {absolute: ident})
    if absolute in hit:
        try:
            return from_json(hit[absolute])
        except (TypeError, ValueError, KeyError):
            pass  # an entry of an older shape: compute again
    value = compute(path)
    store.store(kind, version, [(absolute, ident, to_json(value))])
    return value
