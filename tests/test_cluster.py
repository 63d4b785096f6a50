"""The per-item work on a real Ray cluster (`dagster_project/cluster.py`): a head started here,
on loopback (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` for the head and this driver, see
../shared/notes/scale-out.md), its own worker processes. The demo's evidence and val frames made
on it are byte for byte those of a local run, and a worker killed mid-task has its task run
again with nothing changed in the result."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from dagster_project.parts import fan_out
from dagster_project.runner import materialize
from tests.conftest import copy_home  # and the ray_address fixture

EVIDENCE = ("rvp_evaluations", "rvp_evidence_frames", "rvp_storyboards")
# the views the evidence step reads are rebuilt first: a copied home's catalog reads the other
SELECT = " or ".join([*(f"key:raw_{t}" for t in (*EVIDENCE, "vv_frames")), "key:rvp_intervals"])


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _made(home: Path) -> dict[str, bytes]:
    """Every file the evidence and frames steps write: their parts, images and storyboards."""
    out: dict[str, bytes] = {}
    for folder in ("evidence", "frames", *(f"tables/raw/{t}" for t in (*EVIDENCE, "vv_frames"))):
        out.update({f"{folder}/{k}": v for k, v in _files(home / folder).items()})
    return out


@pytest.mark.slow
def test_the_demo_made_on_ray_is_the_local_run_byte_for_byte(ray_address, demo_warehouse,
                                                             tmp_path):
    settings = copy_home(demo_warehouse, tmp_path / "home", ray_address=ray_address)
    home = settings.home
    for folder in ("evidence", "frames", *(f"tables/raw/{t}" for t in (*EVIDENCE, "vv_frames"))):
        shutil.rmtree(home / folder)
    outcome = materialize(settings, SELECT, checks=False)
    assert outcome.success
    logged = "\n".join(e.user_message for e in outcome.instance.all_logs(outcome.run_id))
    # the work went to the cluster, and the run log says how far it got
    assert "done, " in logged and f"on {ray_address}" in logged
    ours, local = _made(home), _made(demo_warehouse.home)
    assert len(ours) > 100
    assert sorted(ours) == sorted(local)
    assert [name for name in ours if ours[name] != local[name]] == []


@pytest.mark.slow
def test_a_worker_killed_mid_task_has_its_task_run_again(ray_address, tmp_path):
    marks = str(tmp_path)

    def square(job: int) -> int:  # runs in a Ray worker (pickled by value)
        import os
        import time
        from pathlib import Path

        first = Path(marks, f"{job}.first")
        if job == 0 and not first.exists():
            first.write_text(str(os.getpid()))
            time.sleep(300)  # killed here
        Path(marks, f"{job}.{os.getpid()}").write_text("done")
        return job * job

    killed: list[int] = []

    def kill_the_first_attempt() -> None:
        mark = Path(marks, "0.first")
        deadline = time.monotonic() + 180
        while not mark.exists() or not mark.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        pid = int(mark.read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_the_first_attempt)
    killer.start()
    results = sorted(fan_out(square, list(range(6)), 2, ray_address))
    killer.join()
    assert killed, "the first attempt was never seen running"
    assert results == [j * j for j in range(6)]
    # job 0 finished in another process than the one killed
    [finished] = [p for p in Path(marks).glob("0.*") if p.name != "0.first"]
    assert int(finished.name.split(".")[1]) != killed[0]
