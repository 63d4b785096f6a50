"""What was computed from a file, remembered per file identity, so an unchanged file is not read
again: a video probe, a content digest. The identity is (absolute path, size, mtime_ns, inode)
and a version of the computation; each entry is one small JSON file under
`$BENCHLAKE_HOME/cache/<kind>/` (written atomically, so concurrent steps never tear one). The
cache only saves work: deleting it, or a file changed in place with the same size and mtime (which
tools that keep mtimes do not do), costs one computation again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dagster_project.tables import atomic_write_bytes

T = TypeVar("T")


def remembered(path: Path, cache_dir: Path | None, kind: str, version: str,
               compute: Callable[[Path], T], to_json: Callable[[T], Any] = lambda v: v,
               from_json: Callable[[Any], T] = lambda v: v) -> T:
    """`compute(path)`, or what it gave before for this file as it is now."""
    if cache_dir is None:
        return compute(path)
    try:
        st = os.stat(path)
    except OSError:
        return compute(path)  # let the computation say what is wrong with the file
    key = f"{version}\0{os.path.abspath(path)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}"
    entry = cache_dir / kind / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    try:
        return from_json(json.loads(entry.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        pass
    value = compute(path)
    entry.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(entry, json.dumps(to_json(value)).encode())
    return value
