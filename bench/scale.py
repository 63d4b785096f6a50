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
          full one, timed end to end: ingest and score, then `vv_best_checkpoints` (which reads
          vv_scores) queried in a fresh process, as `benchlake sql` does. After each from-scratch
          ingest, every row of `vv_run_pairs` (the paired comparisons an export writes) too.
judgments `--judgments` judgment records (the demo's records for every case, repeated over judge
          runs) in files of 1, 100 and 10,000 records, ingested from scratch, then again with one
          more file.
rynn_vp   `--cases` cases cloned from the demo's (with their candidates) materialized, then again
          with nothing changed, then with one candidate changed: times, and which evidence
          images were written again.
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

RESPONSES = ("key:raw_vv_response_files or key:raw_vv_responses or key:raw_vv_response_rejects"
             " or key:raw_vv_scored_responses")
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
    from dagster_project.warehouse.catalog import connect

    name, select = argv[0], argv[1]
    settings = Settings.from_env()
    report: dict = {}
    t0 = time.perf_counter()
    if select == "views":  # what `benchlake sql "select * from vv_best_checkpoints"` does
        con = connect(settings.home)
        report["best"] = con.execute("SELECT * FROM vv_best_checkpoints").fetchall()
        report["query_s"] = time.perf_counter() - t0
    elif select == "pairs":  # every paired comparison with its error bars (the export reads it)
        con = connect(settings.home)
        report["pairs"] = con.execute("SELECT count(*) FROM vv_run_pairs").fetchone()[0]
        report["query_s"] = time.perf_counter() - t0
    elif not materialize(settings, select, checks=False).success:
        raise SystemExit(f"{name}: materialization failed")
    report["step_s"] = time.perf_counter() - t0
    print(json.dumps(report))


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
    from dagster_project.warehouse.catalog import connect

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
    assert materialize(qsettings, "key:raw_vv_source or key:raw_vv_questions", checks=False).success
    con = connect(qhome)
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
        wall, rss, _ = run_step(["val-" + label, RESPONSES], env)
        rows.append((f"val ingest + score from scratch, {n:,} responses", wall, rss,
                     f"{n / wall:,.0f} responses/s"))
        print(rows[-1], flush=True)
        qwall, qrss, rep = run_step(["val-views-" + label, "views"], env)
        rows.append((f"  then vv_best_checkpoints over {n:,}", qwall, qrss,
                     f"query {rep['query_s']:.1f} s in a fresh process"))
        print(rows[-1], flush=True)
        qwall, qrss, rep = run_step(["val-pairs-" + label, "pairs"], env)
        rows.append((f"  then all of vv_run_pairs over {n:,}", qwall, qrss,
                     f"{rep['pairs']:,} rows, query {rep['query_s']:.1f} s"))
        print(rows[-1], flush=True)
    new = full / "run-0" / jobs[-1][0].name
    os.link(jobs[-1][0], new)
    try:
        wall, rss, _ = run_step(["val-plus-one", RESPONSES], env)
        qwall, qrss, rep = run_step(["val-views-plus-one", "views"], env)
    finally:
        new.unlink()
    rows.append((f"+1 checkpoint file ({per_file:,} responses), views included", wall + qwall,
                 max(rss, qrss), f"ingest + score {wall:.1f} s, then vv_best_checkpoints "
                 f"{qwall:.1f} s (each a fresh process)"))
    print(rows[-1], flush=True)
    return rows


# --- judgments ---------------------------------------------------------------------------------

JUDGMENTS = ("key:raw_rvp_judgment_files or key:raw_rvp_judgments or key:raw_rvp_hallucinations"
             " or key:raw_rvp_judgment_rejects or key:raw_rvp_gt_compilations or "
             "key:raw_rvp_stages")


def _write_judgments(demo_judgments: Path, dest: Path, target: int, tag: str = "") -> int:
    """The demo's records repeated over judge runs `<run>-<k>` until `target` records, in files
    of 10,000, 100 and 1 records (.jsonl, .jsonl, .json); GT compilations repeated alike."""
    records = [json.loads(line) for f in sorted(demo_judgments.glob("*.jsonl"))
               for line in f.read_text().splitlines() if line.strip()]
    gts = [(f.name, json.loads(f.read_text())) for f in sorted(
        (demo_judgments / "gt_compilations").glob("*.json"))]
    copies = -(-target // len(records))
    out = []
    for k in range(copies):
        for r in records:
            out.append({**r, "judge_run_id": f"{r['judge_run_id']}-{tag}{k}"})
    out = out[:target]
    gt_dir = dest / "gt_compilations"
    gt_dir.mkdir(parents=True, exist_ok=True)
    runs = sorted({r["judge_run_id"] for r in out})
    for name, rec in gts:
        for run in runs:
            if run.rsplit("-", 1)[0] == rec.get("judge_run_id"):  # same demo run
                (gt_dir / f"{run}-{name}").write_text(json.dumps({**rec, "judge_run_id": run}))
    singles, hundreds = out[:1000], out[1000:10000]
    for i, r in enumerate(singles):
        (dest / "single" / f"{i:05d}.json").parent.mkdir(parents=True, exist_ok=True)
        (dest / "single" / f"{i:05d}.json").write_text(json.dumps(r))
    for i in range(0, len(hundreds), 100):
        (dest / "hundreds" / f"{i // 100:03d}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (dest / "hundreds" / f"{i // 100:03d}.jsonl").write_text(
            "\n".join(json.dumps(r) for r in hundreds[i:i + 100]) + "\n")
    rest = out[10000:]
    for i in range(0, len(rest), 10000):
        (dest / f"big-{i // 10000}.jsonl").write_text(
            "\n".join(json.dumps(r) for r in rest[i:i + 10000]) + "\n")
    return len(out)


def bench_judgments(args: argparse.Namespace, work: Path) -> list[tuple]:
    from benchlake_demo import ensure_demo
    from dagster_project.runner import materialize
    from dagster_project.settings import Settings

    base = work / "demo-home"
    demo = Settings.from_env({"BENCHLAKE_HOME": str(base)})
    if not (base / "tables").exists():
        ensure_demo(demo)
        assert materialize(demo, "not kind:dbt and not group:reports", checks=False).success
    drop = work / "judgments"
    if not drop.exists():
        n = _write_judgments(demo.demo_dir / "judgments", drop, args.judgments)
    else:
        n = sum(1 for f in drop.rglob("*.json*") if "gt_comp" not in str(f))
    n = args.judgments
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(base, home, ignore=shutil.ignore_patterns("dagster"))
    env = {"BENCHLAKE_HOME": str(home), "RYNN_VP_SOURCE": demo.rynn_vp_source_or_demo(),
           "CANDIDATES_DIR": str(demo.candidates_root()), "JUDGMENTS_DIR": str(drop)}
    rows = []
    wall, rss, rep = run_step(["judgments", JUDGMENTS], env)
    rows.append((f"judgments from scratch, {n:,} records", wall, rss,
                 f"materialize {rep['step_s']:.1f} s"))
    print(rows[-1], flush=True)
    late = work / "late"
    shutil.rmtree(late, ignore_errors=True)
    _write_judgments(demo.demo_dir / "judgments", late, 10000 + 1000 + 9000, tag="late")
    added = [(late / "big-0.jsonl", drop / "late.jsonl")] + [
        (f, drop / "gt_compilations" / f"late-{f.name}")
        for f in (late / "gt_compilations").glob("*.json")]
    for src, dest in added:
        shutil.copy(src, dest)
    try:
        wall, rss, rep = run_step(["judgments-plus-one", JUDGMENTS], env)
    finally:
        for _, dest in added:
            dest.unlink()
    rows.append(("+1 judgment file (10,000 records)", wall, rss,
                 f"materialize {rep['step_s']:.1f} s"))
    print(rows[-1], flush=True)
    return rows


# --- rynn_vp -----------------------------------------------------------------------------------

RYNN_VP = "group:rynn_vp and not kind:dbt"


def _clone_cases(demo_root: Path, demo_cands: Path, snapshot: Path, cands: Path,
                 n: int) -> None:
    """`n` cases cloned from the demo's (case ids renumbered in their last field, task.json
    rewritten, SHA256SUMS.txt recomputed), each with a copy of the demo case's candidates."""
    from benchlake_demo.rynn_vp import write_sha256sums

    shutil.copytree(demo_root, snapshot, ignore=shutil.ignore_patterns("cases"))
    originals = sorted((demo_root / "cases").iterdir())
    for k in range(n):
        src = originals[k % len(originals)]
        case_id = src.name.rsplit("-", 1)[0] + f"-{100 + k:03d}"  # unique per clone
        dest = snapshot / "cases" / case_id
        shutil.copytree(src, dest)
        task = json.loads((dest / "task.json").read_text())
        (dest / "task.json").write_text(json.dumps({**task, "task_id": case_id}, indent=2))
        for system in sorted(p for p in demo_cands.iterdir() if p.is_dir()):
            if (system / src.name).is_dir():
                shutil.copytree(system / src.name, cands / system.name / case_id)
    write_sha256sums(snapshot)


def _stamps(home: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (home / "evidence").rglob("*.jpg")}


def bench_rynn_vp(args: argparse.Namespace, work: Path) -> list[tuple]:
    from benchlake_demo import ensure_demo
    from dagster_project.settings import Settings

    demo = Settings.from_env({"BENCHLAKE_HOME": str(work / "demo-home")})
    ensure_demo(demo)
    snapshot, cands, empty = work / "Rynn-VP", work / "candidates", work / "empty"
    if not snapshot.exists():
        _clone_cases(Path(demo.rynn_vp_source_or_demo()), demo.candidates_root(), snapshot,
                     cands, args.cases)
    empty.mkdir(exist_ok=True)
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)
    env = {"BENCHLAKE_HOME": str(home), "RYNN_VP_SOURCE": str(snapshot),
           "CANDIDATES_DIR": str(cands), "JUDGMENTS_DIR": str(empty)}
    n_video = len(list(cands.glob("*/*/candidate.mp4")))
    n_eval = len([p for p in cands.glob("*/*") if p.is_dir()])
    rows = []
    first, rss, _ = run_step(["rynn_vp-first", RYNN_VP], env)
    rows.append((f"Rynn-VP first run, {args.cases} cases, {n_eval} evaluations", first, rss,
                 f"{n_video} candidate videos"))
    print(rows[-1], flush=True)
    before = _stamps(home)
    wall, rss, _ = run_step(["rynn_vp-again", RYNN_VP], env)
    after = _stamps(home)
    redone = sum(after.get(p) != t for p, t in before.items())
    rows.append(("Rynn-VP again, nothing changed", wall, rss,
                 f"{wall / first:.0%} of the first run; {redone} evidence images rewritten"))
    print(rows[-1], flush=True)
    videos = sorted(cands.glob("*/*/candidate.mp4"))
    target, donor = videos[0], videos[-1]
    saved = target.read_bytes()
    shutil.copy(donor, target)
    try:
        before = _stamps(home)
        wall, rss, _ = run_step(["rynn_vp-one-changed", RYNN_VP], env)
        after = _stamps(home)
    finally:
        target.write_bytes(saved)
    redone = {Path(p).parent.name + "/" + Path(p).parent.parent.name
              for p, t in before.items() if after.get(p) != t and "/P" in p}
    rows.append(("Rynn-VP again, one candidate changed", wall, rss,
                 f"{wall / first:.0%} of the first run; panels rewritten for {len(redone)} "
                 f"evaluation(s): {', '.join(sorted(redone))[:60]}"))
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
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--dir", type=Path, help="work folder, kept (default: a temp folder)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="benchlake-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    benches = {"val": bench_val, "judgments": bench_judgments, "rynn_vp": bench_rynn_vp}
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
