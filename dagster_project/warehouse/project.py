"""The dbt project in `sql/` and its compiled manifest.

The manifest (`sql/target/manifest.json`, git-ignored) is built on demand: `ensure_manifest()`
compiles the project when any file under `sql/` changed since the last compile (a digest of the
files and of the dbt version is kept beside it). It is compiled with the warehouse home as the
placeholder `HOME_PLACEHOLDER`, so one manifest serves every home: `views.py` puts the real home
in when it creates the views. Dagster reads the same manifest for the model assets and checks.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
SQL_DIR = PROJECT_ROOT / "sql"
TARGET_DIR = SQL_DIR / "target"
MANIFEST_PATH = TARGET_DIR / "manifest.json"
# Where the home goes in compiled SQL; quoted like any path when substituted (views.py).
HOME_PLACEHOLDER = "/__BENCHLAKE_HOME__"
_GENERATED = {"target", "logs", "dbt_packages"}


def dbt_executable() -> str:
    """The dbt of this environment (beside the interpreter: `.venv/bin/dbt`), else PATH's."""
    local = Path(sys.executable).parent / "dbt"
    if local.exists():
        return str(local)
    found = shutil.which("dbt")
    if not found:
        raise RuntimeError("dbt is not installed in this environment (run ./dev)")
    return found


def dbt_env(home: Path | str, database: Path) -> dict[str, str]:
    """The environment a dbt command over `home` runs with (`sql/profiles.yml` reads both)."""
    return {**os.environ, "BENCHLAKE_HOME": str(home), "BENCHLAKE_DBT_DATABASE": str(database),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}


def project_digest() -> str:
    """What the compiled manifest depends on: every project file and the dbt version."""
    digest = hashlib.sha256(importlib.metadata.version("dbt-core").encode())
    for path in sorted(SQL_DIR.rglob("*")):
        rel = path.relative_to(SQL_DIR)
        if path.is_file() and rel.parts[0] not in _GENERATED and not rel.name.startswith("."):
            digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_manifest() -> Path:
    """`sql/target/manifest.json`, compiled now if the project changed since the last compile.
    Safe to call from several processes at once (a file lock; the others wait and reuse it)."""
    stamp = TARGET_DIR / ".benchlake-digest"
    digest = project_digest()
    if MANIFEST_PATH.exists() and stamp.exists() and stamp.read_text() == digest:
        return MANIFEST_PATH
    with locked(TARGET_DIR / ".compile.lock"):
        if MANIFEST_PATH.exists() and stamp.exists() and stamp.read_text() == digest:
            return MANIFEST_PATH
        with tempfile.TemporaryDirectory(prefix="benchlake-compile-") as tmp:
            done = subprocess.run(
                [dbt_executable(), "compile", "--project-dir", str(SQL_DIR), "--profiles-dir",
                 str(SQL_DIR), "--target-path", str(TARGET_DIR), "--log-path",
                 str(Path(tmp) / "logs"), "--quiet"],
                env=dbt_env(HOME_PLACEHOLDER, Path(tmp) / "benchlake.duckdb"),
                capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            raise RuntimeError("dbt could not compile sql/:\n" + "\n".join(tail))
        stamp.write_text(digest)
    return MANIFEST_PATH
