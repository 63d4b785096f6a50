"""Val responses throughput: parsing (`raw_vv_responses`) and scoring (`raw_vv_scored_responses`)
of campaign files, as the assets run them, side by side with DuckDB reading the same files.

    python bench/val_responses.py [--runs 2] [--checkpoints 2] [--samples 4] [--before REV]
                                  [--dir DIR]

The files are `bench/scale.py`'s (benchlake's own JSONL records, ~1 KB of thinking each, boxed
answers, plain-text answers, a few without any), `runs × checkpoints` of them, each 3,874
questions × `samples` responses. Each side runs in a fresh process: `response_parts.sync_parts`
(two processes over the files, as the asset) then `response_parts.score_parts`, timed apart.
With `--before REV`, the code of that revision (`git archive`) runs the same steps on the same
files first, and its parts must be byte-identical to this tree's. The reference is DuckDB's
`read_json` count(*) over the files (2 threads), in its own process; every rate is also given as
a ratio to it, by the wall clock and by CPU seconds (what a step costs on a shared machine).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import READ_JSONL, _write_responses  # noqa: E402

SIDE = """
import json, resource, sys, time
from pathlib import Path
import polars as pl
from dagster_project.video_val.response_parts import score_parts, sync_parts
from dagster_project.video_val.responses import ResponseFile
home, files, questions = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]

def clock():  # wall, and CPU of this process and of its (reaped) pool workers
    cpu = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
    return time.perf_counter(), cpu

t0 = clock()
parsed = sync_parts(home, [ResponseFile(rel, 1, sha, Path(path)) for rel, sha, path in files])
t1 = clock()
scored, _unknown = score_parts(home, pl.read_parquet(questions))
t2 = clock()
print(json.dumps({"parse": t1[0] - t0[0], "parse_cpu": t1[1] - t0[1], "score": t2[0] - t1[0],
                  "score_cpu": t2[1] - t1[1], "rows": parsed.rows_written,
                  "scored": scored.rows_written}))
"""


def _questions(n: int = 3874) -> list[tuple[str, str, str]]:
    """(uid, option letters, ground truth), deterministic, the val suite's option sets."""
    rng = random.Random(26)
    out = []
    for i in range(n):
        letters = rng.choice(("ABCD", "ABCD", "ABCDE", "ABCDEF"))
        out.append((f"{('mvbench', 'videomme', 'perception')[i % 3]}:{i}", letters,
                    rng.choice(letters)))
    return out


def _side(tree: Path, home: Path, files: list[tuple[str, str, str]], questions: Path) -> dict:
    shutil.rmtree(home, ignore_errors=True)
    run = subprocess.run([sys.executable, "-c", SIDE, str(home), json.dumps(files),
                          str(questions)], env={**os.environ, "PYTHONPATH": str(tree)},
                         cwd=tree, capture_output=True, text=True, check=False)  # -c: cwd first
    if run.returncode:
        raise SystemExit(f"{tree}: {run.stderr.strip().splitlines()[-1]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _parts(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*.parquet"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--checkpoints", type=int, default=2)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--before", help="a git revision to run side by side (e.g. main)")
    ap.add_argument("--dir", type=Path, help="work folder, kept (default: a temp folder)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="benchlake-val-responses-"))
    work.mkdir(parents=True, exist_ok=True)
    import polars as pl

    from dagster_project.dropfolder import file_sha256

    questions = _questions()
    folder = work / f"r{args.runs}-c{args.checkpoints}-s{args.samples}"
    jobs = [(folder / f"run-{r}" / f"{(c + 1) * 20}.jsonl", f"run-{r}", (c + 1) * 20,
             args.samples, questions) for r in range(args.runs) for c in range(args.checkpoints)]
    todo = [j for j in jobs if not j[0].exists()]
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_write_responses, todo))
    files = [(str(j[0].relative_to(folder)), file_sha256(j[0]), str(j[0])) for j in jobs]
    q_path = work / "questions.parquet"
    pl.DataFrame(questions, schema=["uid", "option_letters", "ground_truth"], orient="row"
                 ).with_columns(data_source=pl.col("uid").str.extract("^([^:]+)")
                                ).write_parquet(q_path)
    size = sum(Path(f[2]).stat().st_size for f in files)
    print(f"{len(files)} files, {size / 1e9:.2f} GB", flush=True)

    def children_cpu() -> float:  # of the reaped child processes
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    start, cpu = time.perf_counter(), children_cpu()
    read = subprocess.run([sys.executable, "-c", READ_JSONL, *(f[2] for f in files)],
                          capture_output=True, text=True, check=True)
    reference, reference_cpu = time.perf_counter() - start, children_cpu() - cpu
    n = int(read.stdout.strip().strip("()").split(",")[0])
    sides = {}
    if args.before:
        tree = work / "before"
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before,
                                  "dagster_project", "sql", "assets"], capture_output=True,
                                 check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        sides[f"before ({args.before})"] = _side(tree, work / "home-before", files, q_path)
    sides["this tree"] = _side(ROOT, work / "home-after", files, q_path)
    if args.before:
        same = _parts(work / "home-before") == _parts(work / "home-after")
        print(f"parts byte-identical before/after: {same}")
        if not same:
            raise SystemExit(1)

    # On a shared machine the wall clock says how busy the others were; the CPU seconds (all
    # processes and threads of the step) say what the step costs: "per 2 CPU-s" is the rate it
    # would reach on two free cores.
    print(f"\nDuckDB read_json count(*) of {n:,} responses (a fresh process, 2 threads): "
          f"{reference:.2f} s wall, {reference_cpu:.2f} CPU-s ({n / reference:,.0f} responses/s,"
          f" {2 * n / reference_cpu:,.0f} per 2 CPU-s)")
    print(f"{'side':<24}{'step':<7}{'wall s':>8}{'resp/s':>10}{'x DuckDB':>10}"
          f"{'CPU-s':>8}{'resp/2 CPU-s':>14}{'x DuckDB':>10}")
    for name, r in sides.items():
        assert r["rows"] == n, (r["rows"], n)
        for step in ("parse", "score"):
            wall, cpu = r[step], r[f"{step}_cpu"]
            print(f"{name:<24}{step:<7}{wall:>8.2f}{n / wall:>10,.0f}{wall / reference:>10.2f}"
                  f"{cpu:>8.2f}{2 * n / cpu:>14,.0f}{cpu / reference_cpu:>10.2f}")
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
