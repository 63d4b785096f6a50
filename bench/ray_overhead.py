"""The evidence workload on Ray against local processes, at the same parallelism, in one run.

    ./dev bench ray_overhead [--cases 40] [--dir DIR]

`--cases` full-size Rynn-VP cases (GT videos of 20-122 s at 640×360, the demo's three systems'
candidates; `bench/scale.py`'s generator) are materialized once; then, for each of local
processes and a Ray cluster started here (loopback, `ray start --head --num-cpus=N`), with 1
and with 2 CPUs, the evidence is deleted and made again by the user's command, `benchlake
materialize --select <the evidence assets>` (1 CPU: the command and the Ray processes pinned to
one core with `taskset`). Printed: each run's wall time and its evidence step's own time, the
scaling from 1 to 2 CPUs, and Ray's overhead against local processes at the same CPUs
(target ≤ 10 %).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import BENCHLAKE, _clone_cases, measure  # noqa: E402

RAY = str(Path(sys.executable).with_name("ray"))
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
EVIDENCE = ("rvp_evaluations", "rvp_evidence_frames", "rvp_storyboards")
SELECT = " or ".join([*(f"key:raw_{t}" for t in EVIDENCE), "key:rvp_intervals"])


def _pinned(cpus: int) -> list[str]:
    return ["taskset", "-c", ",".join(str(c) for c in range(cpus))]


def _start_ray(cpus: int, temp: Path) -> tuple[subprocess.Popen, str]:
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    number = port.getsockname()[1]
    port.close()
    log = temp / "head.log"
    with log.open("wb") as out:
        head = subprocess.Popen(
            [*_pinned(cpus), RAY, "start", "--head", "--block", f"--port={number}",
             f"--num-cpus={cpus}", "--include-dashboard=false", "--disable-usage-stats",
             f"--temp-dir={temp}"], env={**os.environ, **LOOPBACK}, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
    while b"Ray runtime started" not in log.read_bytes():
        if head.poll() is not None:
            raise SystemExit(f"ray did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.5)
    return head, f"127.0.0.1:{number}"


def _stop(head: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            continue


def _evidence_step(home: Path, stderr: str) -> float:
    import dagster as dg

    run_id = re.search(r"; run ([0-9a-f-]{36});", stderr).group(1)
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        [step] = [s for s in instance.get_run_step_stats(run_id) if s.step_key == "rvp_evidence"]
    return step.end_time - step.start_time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--dir", type=Path, help="work folder, kept (default: a temp folder)")
    args = ap.parse_args()
    from benchlake_demo import ensure_demo
    from dagster_project.settings import Settings

    work = args.dir or Path(tempfile.mkdtemp(prefix="benchlake-ray-"))
    work.mkdir(parents=True, exist_ok=True)
    demo = Settings.from_env({"BENCHLAKE_HOME": str(work / "demo-home")})
    ensure_demo(demo)
    data = work / f"full-{args.cases}"
    if not data.exists():
        tmp = data.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        _clone_cases(Path(demo.rynn_vp_source_or_demo()), demo.candidates_root(),
                     tmp / "Rynn-VP", tmp / "candidates", args.cases, True)
        tmp.rename(data)
    (work / "empty").mkdir(exist_ok=True)
    base = work / "home"
    env = {"BENCHLAKE_HOME": str(base), "RYNN_VP_SOURCE": str(data / "Rynn-VP"),
           "CANDIDATES_DIR": str(data / "candidates"), "JUDGMENTS_DIR": str(work / "empty")}
    if not (base / "benchlake.duckdb").exists():
        measure([BENCHLAKE, "materialize", "--select", "group:rynn_vp"], env)
    evaluations = len([p for p in (data / "candidates").glob("*/*") if p.is_dir()])
    print(f"{args.cases} full-size cases, {evaluations} evaluations; "
          f"`benchlake materialize --select {SELECT}` after deleting the evidence", flush=True)
    rows: dict[tuple[str, int], tuple[float, float]] = {}
    for cpus in (1, 2):
        for engine in ("local", "ray"):
            home = work / f"home-{engine}-{cpus}"
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(base, home, ignore=shutil.ignore_patterns("dagster"))
            for folder in ("evidence", *(f"tables/raw/{t}" for t in EVIDENCE)):
                shutil.rmtree(home / folder)
            run_env = {**env, "BENCHLAKE_HOME": str(home)}
            head = None
            if engine == "ray":
                temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
                head, address = _start_ray(cpus, temp)
                run_env.update(LOOPBACK, BENCHLAKE_RAY_ADDRESS=address)
            try:
                run = measure([*_pinned(cpus), BENCHLAKE, "materialize", "--select", SELECT],
                              run_env)
            finally:
                if head is not None:
                    _stop(head)
                    shutil.rmtree(temp, ignore_errors=True)
            step = _evidence_step(home, run.stderr)
            rows[engine, cpus] = (run.wall, step)
            print(f"{engine:<6}{cpus} CPU  command {run.wall:6.1f} s  evidence step {step:6.1f} s"
                  f"  ({evaluations / step:.1f} evaluations/s)", flush=True)
    print()
    for engine in ("local", "ray"):
        (w1, s1), (w2, s2) = rows[engine, 1], rows[engine, 2]
        print(f"{engine}: 1 → 2 CPUs, evidence step {s1 / s2:.2f}× faster (command {w1 / w2:.2f}×)")
    for cpus in (1, 2):
        (lw, ls), (rw, rs) = rows["local", cpus], rows["ray", cpus]
        print(f"{cpus} CPU: Ray's overhead against local processes: evidence step "
              f"{(rs / ls - 1) * 100:+.1f} %, command {(rw / lw - 1) * 100:+.1f} % (target ≤ 10 %)")
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
