"""The GT compilation cache key of a case.

A GT compilation depends on the case's four files and on the prompts that produced it, so its key
is a SHA-256 over the SHA-256 of each file (in a fixed order, as verified against SHA256SUMS.txt)
and the prompt version. Any changed byte, or a new prompt version, gives a new key: the cached
compilation no longer applies and the GT must be compiled again (six stages instead of five).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from dagster_project.tables import raw_schema

GT_INPUT_FILES = ("task.json", "initial.png", "gt.mp4", "gt_annotations.json")


def gt_fingerprint(file_sha256: Mapping[str, str], prompt_version: str) -> str:
    """`file_sha256` maps each of GT_INPUT_FILES to its hex digest."""
    h = hashlib.sha256()
    for name in GT_INPUT_FILES:
        h.update(f"{name}:{file_sha256[name]}\n".encode())
    h.update(f"prompt_version:{prompt_version}\n".encode())
    return h.hexdigest()


# raw_rvp_gt_fingerprints: the GT compilation cache key per case, with one `<file>_sha256` column
# per GT_INPUT_FILES (tests/test_raw_schemas.py holds the YAML to that list)
FINGERPRINTS_SCHEMA = raw_schema("rvp_gt_fingerprints")
