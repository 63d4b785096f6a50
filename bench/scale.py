"""Campaign scale: incremental, bounded-memory ingestion, side by side in one run.

    python bench/scale.py [--only val|judgments|rynn_vp] [--runs 10] [--checkpoints 25]
                          [--samples 8] [--subset 1000000] [--judgments 60000] [--dir DIR]

Every measured step runs in a fresh process (`--step`, below); the parent times it and samples
the peak RSS of its whole process tree (the step and its worker processes) from /proc.

val       A questions table of the published size (5,645 rows), then `runs × checkpoints` verl-style
          files `<run>/<step>.jsonl`, each of 5,645 × `samples` responses (~1 KB of thinking,
          boxed answers, plain-text answers, a few without any), ingested and scored from
          scratch: first a subset of about `--subset` responses, then all of them (11.3 M with the
          defaults), each into a fresh warehouse; then one more checkpoint file on top of the
          full one, timed end to end: ingest, score, and a query of the views (vv_scores,
          vv_best_checkpoints).
judgments `--judgments` judgment records (the demo's records for every case, repeated over judge
          runs) in files of 1, 100 and 10,000 records, ingested from scratch, then again with one
          more file.
rynn_vp   The demo Rynn-VP warehouse materialized, then again with nothing changed, then with one
          candidate changed: time and the evaluations extracted again.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

RESPONSES = ("key:raw/vv_response_files or key:raw/vv_responses or key:raw/vv_response_rejects"
             " or key:raw/vv_scored_responses")
WORDS = ("frame", "scene", "object", "person", "moves", "left", "right", "towards", "camera",
         "table", "cup", "opens", "closes", "the", "a", "then", "after", "before", "video",
         "shows", "first", "second", "clip", "hand", "door", "car", "dog", "red", "blue")


# --- measuring a step in a fresh process ------------------------------------------------------

def _tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return total


def run_step(args: list[str], env: dict[str, str]) -> tuple[float, int, dict]:
    """(wall seconds, peak tree RSS bytes, the step's JSON report)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--step", *args], env={**os.environ, **env},
                            stdout=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.1)
    out = proc.stdout.read() if proc.stdout else ""
    if proc.returncode:
        raise SystemExit(f"step {args} failed ({proc.returncode})")
    return time.perf_counter() - start, peak, json.loads(out.strip().splitlines()[-1])


def step_main(argv: list[str]) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    from dagster_project.runner import materialize
    from dagster_project.settings import Settings
    from dagster_project.warehouse.views import connect

    name, select = argv[0], argv[1]
    settings = Settings.from_env()
    report: dict = {}
    t0 = time.perf_counter()
    result = materialize(settings, select, log_level="ERROR")
    report["materialize_s"] = time.perf_counter() - t0
    if not result.success:
        raise SystemExit(f"{name}: materialization failed")
    if "--query" in argv:
        t1 = time.perf_counter()
        con, _ = connect(settings.home)
        report["vv_scores_rows"] = con.execute("SELECT count(*) FROM vv_scores").fetchone()[0]
        report["best"] = con.execute("SELECT count(*) FROM vv_best_checkpoints").fetchone()[0]
        report["query_s"] = time.perf_counter() - t1
    if "--evaluations" in argv:
        con, _ = connect(settings.home)
        report["extracted"] = _metadata_value(settings, "raw/rvp_evaluations",
                                              "evaluations_extracted")
    print(json.dumps(report))


def _metadata_value(settings, key: str, name: str):
    import dagster as dg

    from dagster_project.runner import dagster_instance

    with dagster_instance(settings) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(key.split("/")))
    value = event.asset_materialization.metadata.get(name) if event else None
    return getattr(value, "value", value)


# --- val ---------------------------------------------------------------------------------------

def _think(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(190))


def _write_responses(job: tuple[Path, str, int, int, list[tuple[str, str, str]]]) -> int:
    path, run, step, samples, questions = job
    rng = random.Random(f"{run}/{step}")
    thinks = [_think(rng) for _ in range(64)]
    skill = 0.35 + 0.02 * (step % 25) + 0.01 * int(run.split("-")[-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for uid, letters, truth in questions:
        for sample in range(samples):
            letter = truth if rng.random() < skill else rng.choice(letters)
            kind = rng.random()
            think = thinks[rng.randrange(64)]
            if kind < 0.8:
                text = f"<think>{think}</think>\n<answer>\\boxed{{{letter}}}</answer>"
            elif kind < 0.9:
                text = f"<think>{think}</think><answer>The answer is {letter}.</answer>"
            elif kind < 0.97:
                text = f"{think} So the answer is ({letter})."
            else:
                text = think
            lines.append(json.dumps({"run_id": run, "step": f"global_step_{step}", "uid": uid,
                                     "sample_idx": sample, "response": text}))
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.rename(path)
    return len(lines)


def bench_val(args: argparse.Namespace, work: Path) -> list[tuple]:
    from benchlake_demo import ensure_demo
    from benchlake_demo.video_val import generate_full_size_parquets
    from dagster_project.runner import materialize
    from dagster_project.settings import Settings
    from dagster_project.warehouse.views import connect

    demo = Settings.from_env({"BENCHLAKE_HOME": str(work / "demo-home")})
    ensure_demo(demo)
    parquets = work / "val-parquets"
    generate_full_size_parquets(parquets)
    base_env = {"VIDEO_VAL_SOURCE": str(parquets),
                "VIDEO_VAL_PREFIX_MAP": demo.video_val_prefix_map_or_demo()}
    qhome = work / "questions-home"
    qsettings = Settings.from_env({**base_env, "BENCHLAKE_HOME": str(qhome),
                                   "RESPONSES_DIR": str(work / "none")})
    (work / "none").mkdir(exist_ok=True)
    assert materialize(qsettings, "key:raw/vv_source or key:raw/vv_questions",
                       log_level="ERROR").success
    con, _ = connect(qhome)
    questions = con.execute("SELECT uid, option_letters, ground_truth FROM vv_questions "
                            "ORDER BY uid").fetchall()
    full = work / "responses"
    extra = work / "extra"
    jobs = [(full / f"run-{r}" / f"{(c + 1) * 20}.jsonl", f"run-{r}", (c + 1) * 20,
             args.samples, questions) for r in range(args.runs) for c in range(args.checkpoints)]
    jobs.append((extra / "run-0" / f"{(args.checkpoints + 1) * 20}.jsonl", "run-0",
                 (args.checkpoints + 1) * 20, args.samples, questions))
    t0 = time.perf_counter()
    todo = [j for j in jobs if not j[0].exists()]
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_write_responses, todo))
    per_file = len(questions) * args.samples
    total = per_file * args.runs * args.checkpoints
    size = sum(j[0].stat().st_size for j in jobs[:-1])
    print(f"val: {len(jobs) - 1} files, {total:,} responses, {size / 1e9:.1f} GB "
          f"(generated in {time.perf_counter() - t0:.0f} s)", flush=True)
    subset = work / "subset"
    n_subset = max(1, round(args.subset / per_file))
    if not subset.exists():
        for path, *_ in jobs[:n_subset]:
            dest = subset / path.relative_to(full)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, dest)
    rows = []
    for label, folder, n in (("subset", subset, n_subset * per_file), ("full", full, total)):
        home = work / f"home-{label}"
        shutil.rmtree(home, ignore_errors=True)
        shutil.copytree(qhome, home, ignore=shutil.ignore_patterns("dagster"))
        env = {**base_env, "BENCHLAKE_HOME": str(home), "RESPONSES_DIR": str(folder)}
        wall, rss, rep = run_step(["val-" + label, RESPONSES, "--query"], env)
        rows.append((f"val from scratch, {n:,} responses", wall, rss,
                     f"{n / wall:,.0f} responses/s; views query {rep['query_s']:.1f} s"))
        print(rows[-1], flush=True)
    new = full / "run-0" / jobs[-1][0].name
    os.link(jobs[-1][0], new)
    try:
        wall, rss, rep = run_step(["val-plus-one", RESPONSES, "--query"], env)
    finally:
        new.unlink()
    rows.append((f"+1 checkpoint file ({per_file:,} responses), views included", wall, rss,
                 f"materialize {rep['materialize_s']:.1f} s, views query {rep['query_s']:.1f} s"))
    print(rows[-1], flush=True)
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--step":
        step_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["val", "judgments", "rynn_vp"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--checkpoints", type=int, default=25)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--subset", type=int, default=1_000_000)
    ap.add_argument("--judgments", type=int, default=60_000)
    ap.add_argument("--dir", type=Path, help="work folder, kept (default: a temp folder)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="benchlake-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    benches = {"val": bench_val}
    for name, fn in benches.items():
        if args.only in (None, name):
            rows += fn(args, work / name)
    print(f"\n{'step':<58}{'wall s':>9}{'peak RSS MB':>13}  notes")
    for label, wall, rss, note in rows:
        print(f"{label:<58}{wall:>9.1f}{rss / 2**20:>13.0f}  {note}")
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
