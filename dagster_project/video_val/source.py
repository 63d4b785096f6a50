"""Acquiring the videorl-video-val parquets: a local folder, or the hub via huggingface_hub."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dagster_project.hub import download_dataset, parse_hub_uri
from dagster_project.roots import Root
from dagster_project.tables import raw_schema
from dagster_project.video_val.schema import SOURCES

# Only the parquets and the docs: the videos are not part of the dataset repository.
HUB_ALLOW_PATTERNS = ["*.parquet", "**/*.parquet", "README*"]


@dataclass(frozen=True)
class ValSource:
    source: str
    local_path: str
    hub_repo_id: str | None
    requested_revision: str | None
    resolved_revision: str | None
    files: dict[str, str]  # published file name → local path (any subset of SOURCES)
    unknown_files: list[str]  # other *.parquet files found (reported, not read)


def find_parquets(root: Path) -> tuple[dict[str, str], list[str]]:
    """The three published file names anywhere under `root` (hub repos may nest them)."""
    found: dict[str, str] = {}
    unknown: list[str] = []
    # A link leading out of the folder is not followed (`roots`); it is named among the unknown.
    walk = Root(root, "VIDEO_VAL_SOURCE").walk(hidden=False)
    for rel, st in walk.files.items():
        name = rel.rsplit("/", 1)[-1]
        if st is None or not name.endswith(".parquet"):
            continue
        if name in SOURCES and name not in found:
            found[name] = str(root / rel)
        else:
            unknown.append(rel)
    unknown += [f"{e.rel} ({e.reason})" for e in walk.escapes if e.rel.endswith(".parquet")]
    return found, unknown


def acquire_val_source(source: str, hub_cache: Path) -> ValSource:
    ref = parse_hub_uri(source)
    if ref is None:
        root = Path(source).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"VIDEO_VAL_SOURCE {source!r}: no such folder")
        files, unknown = find_parquets(root)
        return ValSource(source, str(root), None, None, None, files, unknown)
    path, sha = download_dataset(ref, hub_cache, allow_patterns=HUB_ALLOW_PATTERNS)
    files, unknown = find_parquets(path)
    return ValSource(source, str(path), ref.repo_id, ref.revision, sha, files, unknown)


# raw_vv_source: one row per val parquet found
SOURCE_SCHEMA = raw_schema("vv_source")
