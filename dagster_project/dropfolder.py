"""Drop folders (JUDGMENTS_DIR, RESPONSES_DIR): content-addressed archive of every file version,
and the sensor decision. No Dagster import: the sensors only wrap `changed_files`.

A changed file is a new version, never an overwrite: its bytes are copied once to
`archive/<kind>/<sha256>` and the version list only grows, so every version is read again on
each run and nothing a judge or model wrote can be lost by editing or deleting a file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from dagster_project.tables import atomic_write_bytes, read_table


def scan_drop_folder(root: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under a drop folder (hidden files ignored). Every
    file is listed, whatever its suffix: the readers reject the ones they cannot read, visibly."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not any(part.startswith(".") for part in rel.split("/")):
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def archive_versions(archive_root: Path, root: Path, manifest: Path, home: Path) -> list[dict]:
    """Archive every new (path, content) under `archive_root/<sha256>` and return the full
    version list: the previous manifest (a Parquet table under `home`) plus the new versions."""
    previous = read_table(manifest, home).to_pylist() if manifest.exists() else []
    known = {(r["source_file"], r["sha256"]) for r in previous}
    current = scan_drop_folder(root)
    versions = list(previous)
    for rel, sha in current.items():
        if (rel, sha) in known:
            continue
        archived = archive_root / sha
        if not archived.exists():
            atomic_write_bytes(archived, (root / rel).read_bytes())
        n = 1 + max((r["version"] for r in versions if r["source_file"] == rel), default=0)
        versions.append({"source_file": rel, "version": n, "sha256": sha,
                         "size_bytes": archived.stat().st_size, "archived_path": str(archived)})
    for r in versions:
        r["is_current"] = current.get(r["source_file"]) == r["sha256"]
    return sorted(versions, key=lambda r: (r["source_file"], r["version"]))


def changed_files(root: Path, cursor: str | None) -> tuple[list[str], str, str]:
    """(paths with new content since the cursor, the new cursor, a run key for this change).
    The cursor maps each path to its content hash."""
    seen = json.loads(cursor) if cursor else {}
    current = scan_drop_folder(root)
    changed = sorted(p for p, h in current.items() if seen.get(p) != h)
    run_key = hashlib.sha256(json.dumps([(p, current[p]) for p in changed]).encode()).hexdigest()
    return changed, json.dumps(current, sort_keys=True), run_key
