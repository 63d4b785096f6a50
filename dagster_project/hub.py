"""The optional Hugging Face Hub path: `hf://datasets/<repo_id>[@<revision>]`.

This is the only network access benchlake ever makes, and only when a source setting asks for it.
The revision is resolved to a commit first and the download pinned to that commit, so the
recorded revision is exactly what was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub

from dagster_project.roots import Root

_HUB_URI = re.compile(r"^hf://datasets/(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<rev>[^@\s]+))?/?$")


@dataclass(frozen=True)
class HubRef:
    repo_id: str
    revision: str | None  # as requested (branch, tag or commit); None means the default branch


def parse_hub_uri(uri: str) -> HubRef | None:
    """`hf://datasets/org/name@rev` → HubRef; anything not starting with `hf://` → None."""
    if not uri.startswith("hf://"):
        return None
    match = _HUB_URI.match(uri)
    if not match:
        raise ValueError(
            f"{uri!r} is not a hub dataset reference; expected hf://datasets/<org>/<name>[@<rev>]"
        )
    return HubRef(repo_id=match.group("repo"), revision=match.group("rev"))


def download_dataset(
    ref: HubRef, cache_root: Path, allow_patterns: list[str] | None = None
) -> tuple[Path, str]:
    """Download (or reuse) a dataset snapshot; returns (local folder, resolved commit sha)."""
    info = huggingface_hub.HfApi().dataset_info(ref.repo_id, revision=ref.revision)
    sha = info.sha
    if not sha:
        raise RuntimeError(f"the hub did not report a commit for {ref.repo_id}@{ref.revision}")
    local_dir = cache_root / ref.repo_id.replace("/", "--") / sha
    path = huggingface_hub.snapshot_download(
        repo_id=ref.repo_id,
        repo_type="dataset",
        revision=sha,
        local_dir=str(local_dir),
        allow_patterns=allow_patterns,
    )
    # The download is read as a snapshot root of its own: it must lie in the hub cache.
    return Root(cache_root, "the hub cache").check(Path(path)), sha
