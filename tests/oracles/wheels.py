"""Upstream code as test oracles, read from the published wheels and never installed.

lmms-eval, qwen-vl-utils and verl declare heavy dependencies (torch, transformers, an older
PyAV), so the project does not depend on them. A test takes one file out of the wheel (`./dev`
downloads the lmms-eval and verl wheels into `.venv/oracles/`; otherwise it is downloaded once
into the pytest cache) and loads it as a standalone module, with the imports it does not need stubbed.
Without the wheel and without network the test skips, saying why, except in CI (`CI` set to
anything but false/0, as `.ci/run` and every CI service do): there a missing oracle fails its
tests, so a run cannot go green without its differential checks.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

# Set after a failed download, so the other tests skip at once instead of retrying it.
_failures: dict[str, str] = {}


def _wheel_in(folder: Path, dist: str, version: str) -> Path | None:
    found = sorted(folder.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
    return found[0] if found else None


def wheel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          dist: str, version: str) -> Path:
    """The wheel of `dist==version`: from `.venv/oracles/`, the pytest cache, or downloaded."""
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    cache_dir = (Path(cache.mkdir(f"oracle-{dist}-{version}")) if cache is not None
                 else tmp_path_factory.mktemp(f"oracle-{dist}"))
    for folder in (Path(sys.prefix) / "oracles", cache_dir):
        if (found := _wheel_in(folder, dist, version)) is not None:
            return found
    key = f"{dist}=={version}"
    if key not in _failures:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--retries",
                 "1", "--timeout", "20", key, "-d", str(cache_dir)],
                capture_output=True, text=True, timeout=300)
            reason = done.stderr.strip()[-400:]
        except (OSError, subprocess.SubprocessError) as exc:
            reason = str(exc)
        if (found := _wheel_in(cache_dir, dist, version)) is not None:
            return found
        _failures[key] = f"cannot download {key} (network needed once): {reason}"
    if in_ci():
        pytest.fail(f"{_failures[key]} (CI: a missing test oracle is a failure)")
    pytest.skip(_failures[key])


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def extract(whl: Path, member: str, dest: Path) -> Path:
    """One file of the wheel, written to `dest` (a folder); returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / Path(member).name
    with zipfile.ZipFile(whl) as zf:
        path.write_bytes(zf.read(member))
    return path


def load(path: Path, name: str,
         stubs: Mapping[str, types.ModuleType] | None = None) -> types.ModuleType:
    """`path` executed as the module `name`, with `stubs` in sys.modules while it imports (so
    the package's `__init__` and its heavy imports never run)."""
    saved = {key: sys.modules.get(key) for key in stubs or {}}
    sys.modules.update(stubs or {})
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
