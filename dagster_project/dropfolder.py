"""Drop folders (JUDGMENTS_DIR, RESPONSES_DIR): content-addressed archive of every file version,
and the sensor decision. No Dagster import: the sensors only wrap `changed_files`.

A changed file is a new version, never an overwrite: its bytes are copied once to
`archive/<kind>/<sha256>` and the version list only grows, so every version is read again on
each run and nothing a judge or model wrote can be lost by editing or deleting a file.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from dagster_project.filecache import DIGEST_KIND, DIGEST_VERSION, FileCache, Identity
from dagster_project.roots import Escape, Root
from dagster_project.tables import raw_schema, read_table, temp_beside

T = TypeVar("T")
CHUNK = 1 << 20  # bytes read at a time
# Files hashed or archived at once: hashlib and the kernel's copy run without the GIL, so a
# campaign folder's first scan takes about 1/THREADS of the time on as many cores.
THREADS = min(4, os.cpu_count() or 1)


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 1 MB pieces (a file of any size in bounded memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while data := fh.read(CHUNK):
            digest.update(data)
    return digest.hexdigest()


def _each(work: Callable[[T], str], items: Sequence[T], sizes: Sequence[int]) -> list[str]:
    """`work(item)` of each item (of `sizes` bytes), in their order: those of a MB or more
    `THREADS` at a time, the others in this thread meanwhile (a thread per small file costs
    more than it saves)."""
    out: list[str] = [""] * len(items)
    big = [i for i, size in enumerate(sizes) if size >= CHUNK]
    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="dropfolder") as pool:
        running = {i: pool.submit(work, items[i]) for i in big}
        for i, item in enumerate(items):
            if i not in running:
                out[i] = work(item)
        for i, future in running.items():
            out[i] = future.result()
    return out


def _files(root: Path) -> list[tuple[str, os.stat_result]]:
    """(relative path, stat) of every regular file under `root`, hidden ones and hidden folders
    left out, sorted; one stat per file. Links that stay inside are followed, links that lead
    out are not (`roots`; `escapes` names them)."""
    walk = Root(root, "the drop folder").walk(hidden=False)
    return [(rel, st) for rel, st in walk.files.items() if st is not None]


def escapes(root: Path, setting: str) -> list[Escape]:
    """The links in drop folder `root` (named by `setting`) that lead out of it: never listed,
    hashed nor archived, each a refusal with its reason."""
    return Root(root, setting).walk(hidden=False).escapes if root.is_dir() else []


def scan_drop_folder(root: Path, stat_cache: Path | None = None,
                     digest: Callable[[Path], str] = file_sha256) -> dict[str, str]:
    """{relative path: sha256} of every file under a drop folder (hidden files ignored). Every
    file is listed, whatever its suffix: the readers reject the ones they cannot read, visibly.

    With `stat_cache` (the file-identity cache, `Settings.file_cache`), a file whose size,
    mtime and inode are those recorded with its digest is not read again: a campaign folder of
    many GB, or of 60,000 one-record files, is hashed once, and each later scan (every sensor
    tick, every run) only stats it and makes one query. `digest` computes the sha256 of a file
    the cache does not know (archiving copies the file and hashes the copy)."""
    return _scan(root, stat_cache, digest)[0]


def _scan(root: Path, stat_cache: Path | None, digest: Callable[[Path], str]
          ) -> tuple[dict[str, str], dict[str, Identity]]:
    """`scan_drop_folder`, and the identity of each file whose digest the cache held."""
    files = _files(root)
    base = os.path.abspath(root)
    absolute = {rel: f"{base}/{rel}" for rel, _ in files}
    idents = {absolute[rel]: Identity.of(st) for rel, st in files}
    cache = FileCache(stat_cache) if stat_cache is not None else None
    known, gone = (cache.lookup_under(DIGEST_KIND, DIGEST_VERSION, base, idents)
                   if cache is not None else ({}, []))
    todo = [rel for rel, _ in files if absolute[rel] not in known]
    computed = dict(zip(todo, _each(digest, [root / rel for rel in todo],
                                    [idents[absolute[rel]].size for rel in todo]), strict=True))
    fresh = [(absolute[rel], idents[absolute[rel]], sha) for rel, sha in computed.items()]
    found = {rel: known.get(absolute[rel]) or computed[rel] for rel, _ in files}
    if cache is not None:  # an unchanged folder writes nothing
        cache.store(DIGEST_KIND, DIGEST_VERSION, fresh, forget=gone)
    return found, {rel: idents[absolute[rel]] for rel, _ in files if absolute[rel] in known}


def drop_folder_listing(root: Path, stat_cache: Path | None = None) -> dict[str, str]:
    """{relative path: sha256} of a drop folder, empty if it does not exist yet."""
    return scan_drop_folder(root, stat_cache) if root.is_dir() else {}


def listing_version(listing: dict[str, str]) -> str:
    """The data version of a folder: a digest of {relative path: content or stat identity}."""
    return hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()[:32]


def stat_listing(root: Path, pattern: str = "*") -> dict[str, str]:
    """{relative path: size and mtime} of the files under `root` matching `pattern` (a glob on
    the name): the identity of a folder too large to hash on every look (a snapshot's videos).
    Links leading out of `root` are not followed (`roots`)."""
    if not root.is_dir():
        return {}
    return {rel: f"{st.st_size}:{st.st_mtime_ns}" for rel, st in _files(root)
            if fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern)}


def archive_copy(src: Path, archive_root: Path,
                 known: tuple[Identity, str] | None = None) -> str:
    """Copy `src` into `archive_root/<sha256>` through a temp file and a rename; the sha256 of
    the copy (what the archive holds, even if `src` changed meanwhile). A file under a MB is
    read once and hashed and written from memory. A larger one is copied by the kernel
    (`shutil.copyfile`: no bytes through Python), then the copy is hashed: ~1.5x faster than
    hashing while writing each piece. `known`: (identity, sha256) the stat cache recorded for
    `src`; a file that still has that identity after the copy is not hashed again (the cache's
    own rule), so archiving what the folder's observation hashed costs the copy alone."""
    fd, tmp = temp_beside(archive_root / "incoming")
    try:
        with os.fdopen(fd, "wb") as out, src.open("rb") as fh:
            head = fh.read(CHUNK)
            small = len(head) < CHUNK
            if small:
                out.write(head)
        if small:
            sha = hashlib.sha256(head).hexdigest()
        else:
            shutil.copyfile(src, tmp)
            if known is not None and Identity.of(os.stat(src)) == known[0]:
                sha = known[1]
            else:
                sha = file_sha256(Path(tmp))
        os.replace(tmp, archive_root / sha)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return sha


def copy_deferred(archived: Path, sha256: str, copy: tuple[Path, Identity] | None) -> bool:
    """Copy the version archived at `archived` (digest `sha256`) from its drop-folder file, if
    `archive_versions` left that to the caller (`copy`: the file and its identity at the scan):
    whether the archive then holds the version's bytes (False: the file was rewritten since the
    scan, and its new bytes are archived under their own digest, or removed)."""
    if copy is None:
        return True
    src, identity = copy
    try:
        return archive_copy(src, archived.parent, (identity, sha256)) == sha256
    except FileNotFoundError:  # removed since the scan: no longer the folder's content
        return False


def archive_versions(archive_root: Path, roots: Path | Sequence[Path], manifest: Path,
                     home: Path, stat_cache: Path | None = None,
                     deferred: dict[str, tuple[Path, Identity]] | None = None) -> list[dict]:
    """Archive every new (path, content) of the drop folder(s) `roots` (a folder that does not
    exist is empty) under `archive_root/<sha256>` and return the full version list: the
    previous manifest (a Parquet table under `home`) plus the new versions.

    Each version records the folder it came from. Versions seen in another folder (the setting
    pointed elsewhere before) stay listed and archived but are not current: readers take only
    `versions_of(versions, roots)`. Version numbers count per file name across folders, so
    (source_file, version) names one version whatever the folder.

    `deferred`: a dict through which the caller takes over the copies of the new files whose
    digest the stat cache holds (the folder's observation hashed them), so that it can copy
    and read them side by side: they are listed by that digest, not copied, and put there as
    archived path -> (the file, its identity at the scan). The caller copies each
    (`copy_deferred`) before it reads it, and must check what that returns: a file rewritten
    since the scan is archived under another digest, and then this list is not what the folder
    holds (call again without `deferred`)."""
    roots = [roots] if isinstance(roots, Path) else list(roots)
    previous = read_table(manifest, home).to_pylist() if manifest.exists() else []
    for r in previous:
        r.setdefault("folder", str(roots[0]))  # manifests written before folders were recorded
    known = {(r["folder"], r["source_file"], r["sha256"]) for r in previous}
    versions = list(previous)
    latest: dict[str, int] = {}  # file name -> its highest version so far (any folder)
    for r in previous:
        latest[r["source_file"]] = max(latest.get(r["source_file"], 0), r["version"])
    current: dict[str, dict[str, str]] = {}
    for root in roots:
        folder = str(root)
        # A file the stat cache does not know is copied into the archive and the copy hashed
        # (no second read of the file); the copy is named by the bytes actually copied, so a
        # file rewritten meanwhile is simply a version the next scan finds.
        listing, recorded = _scan(root, stat_cache, lambda path: archive_copy(
            path, archive_root)) if root.is_dir() else ({}, {})
        current[folder] = listing
        new = {rel: sha for rel, sha in listing.items() if (folder, rel, sha) not in known}
        # known to the stat cache (the folder's observation hashed it) but not archived yet
        absent = [rel for rel, sha in new.items() if not (archive_root / sha).exists()]
        # their identity at the scan (size included: no second stat); those the caller copies
        later = ({rel: recorded[rel] for rel in absent if rel in recorded}
                 if deferred is not None else {})
        now = [rel for rel in absent if rel not in later]
        jobs = [(root / rel, archive_root, (recorded[rel], new[rel]) if rel in recorded else None)
                for rel in now]
        new.update(zip(now, _each(lambda job: archive_copy(*job), jobs,
                                  [recorded[rel].size if rel in recorded else 0 for rel in now]),
                       strict=True))
        for rel, sha in new.items():
            archived = archive_root / sha
            if (folder, rel, sha) in known:  # changed since the scan, back to a known version
                continue
            if rel in later:
                deferred[str(archived)] = (root / rel, later[rel])  # type: ignore[index]
            n = latest[rel] = latest.get(rel, 0) + 1
            versions.append({"folder": folder, "source_file": rel, "version": n, "sha256": sha,
                             "size_bytes": later[rel].size if rel in later
                             else archived.stat().st_size,
                             "archived_path": str(archived)})
    for r in versions:
        r["is_current"] = current.get(r["folder"], {}).get(r["source_file"]) == r["sha256"]
    return sorted(versions, key=lambda r: (r["source_file"], r["version"]))


def versions_of(versions: list[dict], roots: Path | Sequence[Path]) -> list[dict]:
    """The versions that came from drop folder(s) `roots` (what the tables are built from)."""
    folders = {str(roots)} if isinstance(roots, Path) else {str(r) for r in roots}
    return [v for v in versions if v["folder"] in folders]


def ingested_cursor(versions: Path, root: Path, home: Path) -> str | None:
    """A sensor cursor (path → content hash) of the versions of drop folder `root` that are
    already ingested and current, from the versions table at `versions`; None if none."""
    if not versions.exists():
        return None
    rows = read_table(versions, home, ["folder", "source_file", "sha256", "is_current"])
    current = {r["source_file"]: r["sha256"] for r in rows.to_pylist()
               if r["is_current"] and r["folder"] == str(root)}
    return json.dumps(current, sort_keys=True) if current else None


def changed_files(root: Path, cursor: str | None, stat_cache: Path | None = None
                  ) -> tuple[list[str], str, str]:
    """(paths with new content since the cursor, the new cursor, a run key for this change).
    The cursor maps each path to its content hash."""
    seen = json.loads(cursor) if cursor else {}
    current = scan_drop_folder(root, stat_cache)
    changed = sorted(p for p, h in current.items() if seen.get(p) != h)
    run_key = hashlib.sha256(json.dumps([(p, current[p]) for p in changed]).encode()).hexdigest()
    return changed, json.dumps(current, sort_keys=True), run_key


# raw_rvp_judgment_files, raw_vv_response_files: every version of every file of a drop folder.
# Both staging YAMLs declare the same columns (tests/test_raw_schemas.py holds them equal), so
# the one generic schema is read from the first.
VERSIONS_SCHEMA = raw_schema("rvp_judgment_files")
