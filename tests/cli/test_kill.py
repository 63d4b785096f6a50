"""A `kill -9` of `benchlake materialize`, at any moment, leaves nothing running and nothing
torn: the process-pool workers die with it (`dagster_project/lifeline.py`; dbt builds in the
process itself), and a rerun then writes what an undisturbed run writes, byte for byte."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from tests.warehouse.test_determinism import COMPARED

BENCHLAKE = str(Path(sys.executable).parent / "benchlake")
SETTLE_SECONDS = 30.0  # orphans used to live on for minutes; the dead go within a second or two

Process = tuple[int, int]  # pid and start time: a pid alone may be reused


def _stat(pid: int) -> tuple[str, int, int, str] | None:
    """State, parent pid, start time and name of `pid` (None: no such process). The name is
    the program's, set before `exec` returns and copied by `fork`; the command line is empty
    for a while in a process being forked or exec'ed."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name may hold spaces
    return fields[0], int(fields[1]), int(fields[19]), text[text.index("(") + 1:text.rindex(")")]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _descendants(root: int) -> dict[Process, str]:
    """Every living descendant of `root`: `(name) command line`, as `ps` shows it."""
    children: dict[int, list[tuple[int, int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) and stat[0] != "Z":
            children.setdefault(stat[1], []).append((int(entry.name), stat[2], stat[3]))
    found: dict[Process, str] = {}
    todo = [root]
    while todo:
        for pid, start, name in children.get(todo.pop(), []):
            found[(pid, start)] = f"({name}) {_cmdline(pid)}"
            todo.append(pid)
    return found


def _alive(processes: dict[Process, str]) -> dict[Process, str]:
    """Those of `processes` still running (a zombie has ended)."""
    out = {}
    for (pid, start), cmd in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == start and stat[0] != "Z":
            out[(pid, start)] = cmd
    return out


def _outlived(processes: dict[Process, str]) -> dict[Process, str]:
    """Those of `processes` still running after a while; killed, so a failure leaks none."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while _alive(processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _alive(processes)
    for pid, _ in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _listing(home: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in home.rglob("*"):
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        out[p.relative_to(home).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(
        ("BENCHLAKE_", "RYNN_VP_", "VIDEO_VAL_", "CANDIDATES_", "JUDGMENTS_", "RESPONSES_"))}
    return {**env, "BENCHLAKE_HOME": str(home)}


Moment = Callable[[dict[Process, str]], bool]


def _kill_when(home: Path, log: Path, moment: Moment) -> dict[Process, str]:
    """Start `benchlake materialize` in its own session and `kill -9` it as soon as `moment`
    holds of its descendants; what was running then. Asserts that
    nothing it started outlives it, that no file changes after and that none is torn."""
    with log.open("ab") as out:
        cli = subprocess.Popen([BENCHLAKE, "materialize"], env=_env(home), stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    seen: dict[Process, str] = {}
    try:
        while cli.poll() is None:
            running = _descendants(cli.pid)
            seen.update(running)
            if moment(running):
                cli.kill()
                break
            time.sleep(0.05)
        assert cli.wait() == -signal.SIGKILL, f"the run ended before the moment:\n" \
                                              f"{log.read_text()[-3000:]}"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert _outlived(seen) == {}, "still running after the kill"
    before = _listing(home)
    time.sleep(2)
    assert _listing(home) == before, "files still change after the kill"
    # Nothing torn: every Parquet and JPEG file there is reads whole (writes are a rename).
    for path in home.rglob("*.parquet"):
        pq.ParquetFile(path).metadata  # noqa: B018 - raises on a torn file
    for path in home.rglob("*.jpg"):
        with Image.open(path) as image:
            image.load()
    return running


def _extracting(home: Path) -> Moment:
    """Evidence extraction under way: its images appear while the pool's workers (forks of the
    CLI, named as it is) run."""
    return lambda running: any(cmd.startswith("(benchlake) ") for cmd in running.values()) and \
        any((home / "evidence").rglob("*.jpg"))


def _dbt_building(home: Path) -> Moment:
    """A dbt build under way in the run (dbt runs in its process: a node it started, in the
    home's dbt log, after what the log held when the run began)."""
    log = home / "dbt" / "logs" / "dbt.log"
    start = log.stat().st_size if log.exists() else 0

    def moment(running: dict[Process, str]) -> bool:
        if not log.exists():
            return False
        with log.open("rb") as fh:
            fh.seek(start)
            return b" START " in fh.read()
    return moment


@pytest.mark.slow
def test_killed_materialize_leaves_nothing_running_and_a_rerun_writes_the_same_bytes(
        demo_inputs, demo_warehouse, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copytree(demo_inputs.demo_dir, home / "demo")
    log = tmp_path / "materialize.log"
    _kill_when(home, log, _extracting(home))
    # then during a dbt build (this run redoes what the killed one had not finished)
    _kill_when(home, log, _dbt_building(home))

    done = subprocess.run([BENCHLAKE, "materialize"], env=_env(home), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for folder in COMPARED:
        ours, undisturbed = _files(home / folder), _files(demo_warehouse.home / folder)
        assert ours, folder
        assert sorted(ours) == sorted(undisturbed), folder
        assert [name for name in ours if ours[name] != undisturbed[name]] == [], folder


CHILDREN = """
import os, subprocess, threading, time
from dagster_project import lifeline
from dagster_project.parts import fan_out

def dbt_like():
    subprocess.run(lifeline.command("sleep") + ["600"], env={**os.environ, **lifeline.env()})

threading.Thread(target=dbt_like).start()
list(fan_out(time.sleep, [600, 600], 2))
"""


def _workers(running: dict[Process, str]) -> int:
    return sum("fan_out(time.sleep" in cmd for cmd in running.values())


def test_children_die_with_their_parent(tmp_path: Path) -> None:
    """The mechanism alone, fast: a pool's workers and a program run through `lifeline` (from
    another thread, as dagster-dbt's is) end when their parent is killed."""
    parent = subprocess.Popen([sys.executable, "-c", CHILDREN], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        running: dict[Process, str] = {}
        while time.monotonic() < deadline:
            running = _descendants(parent.pid)
            if _workers(running) == 2 and "(sleep) sleep 600" in running.values():
                break
            time.sleep(0.05)
        assert _workers(running) == 2 and "(sleep) sleep 600" in running.values(), running
    finally:
        parent.kill()
        parent.wait()
    assert _outlived(running) == {}
