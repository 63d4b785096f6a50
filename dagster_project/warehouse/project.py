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

from dagster_project.settings import SQL_DIR

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


def project_digest(sql_dir: Path = SQL_DIR) -> str:
    """What the compiled manifest depends on: every project file and the dbt version."""
    digest = hashlib.sha256(importlib.metadata.version("dbt-core").encode())
    for path in sorted(sql_dir.rglob("*")):
        rel = path.relative_to(sql_dir)
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


def ensure_manifest(sql_dir: Path = SQL_DIR) -> Path:
    """`<sql_dir>/target/manifest.json`, compiled now if the project changed since the last
    compile. Safe to call from several processes at once (a file lock; the others wait and
    reuse it). `sql_dir` is the project's `sql/` unless a test or a notebook points elsewhere
    (a copy with other weights, say)."""
    target = sql_dir / "target"
    manifest, stamp = target / "manifest.json", target / ".benchlake-digest"
    digest = project_digest(sql_dir)
    if manifest.exists() and stamp.exists() and stamp.read_text() == digest:
        return manifest
    with locked(target / ".compile.lock"):
        if manifest.exists() and stamp.exists() and stamp.read_text() == digest:
            return manifest
        with tempfile.TemporaryDirectory(prefix="benchlake-compile-") as tmp:
            done = subprocess.run(
                [dbt_executable(), "compile", "--project-dir", str(sql_dir), "--profiles-dir",
                 str(sql_dir), "--target-path", str(target), "--log-path",
                 str(Path(tmp) / "logs"), "--quiet"],
                env=dbt_env(HOME_PLACEHOLDER, Path(tmp) / "benchlake.duckdb"),
                capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            raise RuntimeError(f"dbt could not compile {sql_dir}:\n" + "\n".join(tail))
        stamp.write_text(digest)
    return manifest
