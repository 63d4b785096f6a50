"""Acquiring a Rynn-VP snapshot: a local folder, or the hub through huggingface_hub."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dagster_project.hub import download_dataset, parse_hub_uri
from dagster_project.tables import raw_schema

# The card's metadata-only download ("tasks and annotations initially"), plus SHA256SUMS.txt:
# it is tiny, and without it the downloaded files could not be verified.
METADATA_ALLOW_PATTERNS = [
    "cases/*/task.json",
    "cases/*/gt_annotations.json",
    "README*",
    "LICENSE",
    "SHA256SUMS.txt",
]


@dataclass(frozen=True)
class Snapshot:
    source: str
    local_path: str
    hub_repo_id: str | None
    requested_revision: str | None
    resolved_revision: str | None
    media_mode: str


def acquire_snapshot(source: str, media_mode: str, hub_cache: Path) -> Snapshot:
    ref = parse_hub_uri(source)
    if ref is None:
        root = Path(source).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"RYNN_VP_SOURCE {source!r}: no such folder")
        if not (root / "cases").is_dir():
            raise FileNotFoundError(f"RYNN_VP_SOURCE {source!r}: no 'cases/' folder inside")
        return Snapshot(source, str(root), None, None, None, media_mode)
    patterns = METADATA_ALLOW_PATTERNS if media_mode == "metadata" else None
    path, sha = download_dataset(ref, hub_cache, allow_patterns=patterns)
    return Snapshot(source, str(path), ref.repo_id, ref.revision, sha, media_mode)


# raw_rvp_snapshot: one row, the acquired snapshot
SNAPSHOT_SCHEMA = raw_schema("rvp_snapshot")


def snapshot_root(home: Path) -> tuple[Path, str]:
    """(local folder, media mode) of the acquired snapshot, as raw_rvp_snapshot recorded it."""
    from dagster_project.tables import read_table, table_path

    row = read_table(table_path(home, "rvp_snapshot"), home).to_pylist()[0]
    return Path(row["local_path"]), row["media_mode"]
