"""Campaign scale: what the user waits for, side by side with the physical reference, in one run.

    ./dev bench scale [--only val|judgments|rynn_vp] [--runs 10] [--checkpoints 25] [--samples 8]
                      [--judgments 60000] [--cases 200] [--full-size] [--dir DIR]

Every timed step is the user's own command, `benchlake ...`, run as a subprocess: the parent
times it and samples the peak RSS of its whole process tree from /proc. Next to it, in the same
run, a fresh process does the least work the same input needs (the reference), and the table
gives the project's time as a multiple of it. After each `benchlake materialize`, a profile: the
slowest Dagster steps (from the CLI's one line per step) and, for the dbt build, models vs data
tests (from the `run_results.json` the build leaves in the home's dbt workspace).

val       A questions table of the published size (5,645 rows), then `runs × checkpoints` verl-style
          files `<run>/<step>.jsonl`, each of 5,645 × `samples` responses (~1 KB of thinking,
          boxed answers, plain-text answers, a few without any): 11.3 M with the defaults.
          `materialize --select group:video_val` from scratch (checks and views included), the
          first `sql` of vv_best_checkpoints, vv_scores, vv_run_pairs, vv_question_history,
          vv_flips and vv_flip_groups, each in a fresh
          process; then one more checkpoint file (materialize, then vv_best_checkpoints again);
          then `export`. Reference: DuckDB reading the same JSONL files (count and total length
          of the responses, 2 threads).
judgments `--judgments` judgment records (the demo's, repeated over 10 judge runs per demo run,
          then as further attempts) in files of 1, 100 and 10,000 records: `materialize
          --select group:rynn_vp` with them (the videos already done), then with one more file
          of 10,000 (with GT compilations; both sort among the earlier files), then with one
          that sorts after every other; each also with the judgment step's own time and rate;
          then a new system's candidates (a system's copied under a new name), which change
          what every record is checked against. Reference: DuckDB parsing every record of the
          same files (`read_json_objects`, 2 threads): all of them, then the files added.
rynn_vp   `--cases` cases cloned from the demo's, with their candidates (`--full-size`: GT videos
          of 20-122 s at 640×360, remuxed from a few short encoded clips without re-encoding):
          `materialize --select group:rynn_vp` first, again with nothing changed, again with one
          candidate changed. Reference: PyAV decoding every frame of every GT and candidate video.

Generated data is deterministic and kept in `--dir` (reused by the next run with the same sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

BENCHLAKE = str(Path(sys.executable).with_name("benchlake"))
WORDS = ("frame", "scene", "object", "person", "moves", "left", "right", "towards", "camera",
         "table", "cup", "opens", "closes", "the", "a", "then", "after", "before", "video",
         "shows", "first", "second", "clip", "hand", "door", "car", "dog", "red", "blue")


# --- measuring a command in a fresh process ---------------------------------------------------

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


@dataclass
class Run:
    wall: float
    rss: int  # peak bytes of the whole process tree
    stdout: str
    stderr: str


def measure(cmd: list[str], env: dict[str, str]) -> Run:
    """Run `cmd` to its end in a fresh process; fails the benchmark if the command fails."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=out, stderr=err, text=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.1)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        run = Run(wall, peak, out.read(), err.read())
    if proc.returncode:
        tail = "\n".join(run.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}):\n{tail}")
    return run


def benchlake(*args: str, env: dict[str, str]) -> Run:
    return measure([BENCHLAKE, *args], env)


def python(script: str, *args: str) -> Run:
    return measure([sys.executable, "-c", script, *args], {})


def profile(run: Run, home: Path, started: float) -> str:
    """Where a `benchlake materialize` spent its time: its slowest Dagster steps (read back from
    the home's Dagster instance; the CLI names the run on its last line) and, when it built
    dbt nodes, models vs data tests."""
    import dagster as dg

    run_id = re.search(r"; run ([0-9a-f-]{36});", run.stderr).group(1)
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        steps = sorted(((s.end_time - s.start_time, s.step_key)
                        for s in instance.get_run_step_stats(run_id)
                        if s.start_time and s.end_time), reverse=True)
    total = sum(s for s, _ in steps)
    parts = [f"{len(steps)} steps {total:.0f} s, the rest of the process {run.wall - total:.0f} s;"
             " slowest: " + ", ".join(f"{name} {s:.1f}" for s, name in steps[:6])]
    results = home / "dbt" / "target" / "run_results.json"
    if results.exists() and results.stat().st_mtime >= started:
        split: dict[str, list[float]] = {}
        for r in json.loads(results.read_text())["results"]:
            split.setdefault(r["unique_id"].split(".")[0], []).append(r["execution_time"])
        parts.append("dbt: " + ", ".join(f"{len(t)} {kind}s {sum(t):.1f} s"
                                        for kind, t in sorted(split.items()))
                     + " (node times; dbt runs up to its thread count at once)")
    return "\n".join("    " + p for p in parts)


class Table:
    """The rows of the final table, each printed as soon as it is measured."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, workload: str, run: Run, reference: float | None = None,
            rate: str = "", notes: str = "") -> None:
        ratio = f"{run.wall / reference:.1f}×" if reference else ""
        row = (workload, run.wall, run.rss / 2**20, reference, ratio, rate, notes)
        self.rows.append(row)
        print(self._line(row), flush=True)

    @staticmethod
    def _line(row: tuple) -> str:
        workload, wall, rss, ref, ratio, rate, notes = row
        ref_s = f"{ref:.1f}" if ref else ""
        return (f"{workload:<46}{wall:>8.1f}{rss:>9.0f}{ref_s:>8}{ratio:>8}  {rate:<16}"
                f"{notes}")

    def print(self) -> None:
        print(f"\n{'workload':<46}{'wall s':>8}{'RSS MB':>9}{'ref s':>8}{'ratio':>8}  "
              f"{'rate':<16}notes")
        for row in self.rows:
            print(self._line(row))


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


READ_JSONL = """
import duckdb, sys
con = duckdb.connect()
con.execute("SET threads = 2; SET enable_progress_bar = false")
print(con.execute("SELECT count(*), sum(length(response)) FROM read_json(?, "
                  "format='newline_delimited')", [sys.argv[1:]]).fetchone())
"""


def duckdb_reference(files: list[Path]) -> tuple[float, int]:
    """(seconds, responses): DuckDB reading `files` in a fresh process."""
    run = python(READ_JSONL, *map(str, files))
    return run.wall, int(run.stdout.strip().strip("()").split(",")[0])


READ_JSON = """
import duckdb, sys
con = duckdb.connect()
con.execute("SET threads = 2; SET enable_progress_bar = false")
n = 0
for fmt, ext in (("newline_delimited", ".jsonl"), ("auto", ".json")):
    files = [f for f in sys.argv[1:] if f.endswith(ext)]
    if files:
        n += con.execute("SELECT count(*) FROM read_json_objects(?, format = ?)",
                         [files, fmt]).fetchone()[0]
print(n)
"""


def json_reference(files: list[Path]) -> tuple[float, int]:
    """(seconds, records): DuckDB parsing every record of the judgment files `files` (JSON
    Lines, or JSON: one object or an array) in a fresh process."""
    run = python(READ_JSON, *map(str, files))
    return run.wall, int(run.stdout.strip())


def _questions(work: Path, base_env: dict[str, str]) -> list[tuple[str, str, str]]:
    """The val questions (uid, option letters, ground truth), as the pipeline reads them."""
    cached = work / "questions.json"
    if not cached.exists():
        home = work / "questions-home"
        shutil.rmtree(home, ignore_errors=True)
        env = {**base_env, "BENCHLAKE_HOME": str(home), "RESPONSES_DIR": str(work / "none")}
        (work / "none").mkdir(exist_ok=True)
        benchlake("materialize", "--select", "+key:vv_questions", env=env)
        rows = json.loads(benchlake("sql", "SELECT uid, option_letters, ground_truth FROM "
                                    "vv_questions ORDER BY uid", "--format", "json",
                                    env=env).stdout)
        cached.write_text(json.dumps([[r["uid"], r["option_letters"], r["ground_truth"]]
                                      for r in rows]))
    return [tuple(q) for q in json.loads(cached.read_text())]


def bench_val(args: argparse.Namespace, work: Path, table: Table) -> None:
    from benchlake_demo import ensure_demo
    from benchlake_demo.video_val import generate_full_size_parquets
    from dagster_project.settings import Settings

    demo = Settings.from_env({"BENCHLAKE_HOME": str(work.parent / "demo-home")})  # shared
    ensure_demo(demo)
    parquets = work / "val-parquets"
    generate_full_size_parquets(parquets)
    base_env = {"VIDEO_VAL_SOURCE": str(parquets),
                "VIDEO_VAL_PREFIX_MAP": demo.video_val_prefix_map_or_demo()}
    questions = _questions(work, base_env)
    size = f"r{args.runs}-c{args.checkpoints}-s{args.samples}"
    full, extra = work / size / "responses", work / size / "extra"
    jobs = [(full / f"run-{r}" / f"{(c + 1) * 20}.jsonl", f"run-{r}", (c + 1) * 20,
             args.samples, questions) for r in range(args.runs) for c in range(args.checkpoints)]
    jobs.append((extra / "run-0" / f"{(args.checkpoints + 1) * 20}.jsonl", "run-0",
                 (args.checkpoints + 1) * 20, args.samples, questions))
    t0 = time.perf_counter()
    todo = [j for j in jobs if not j[0].exists()]
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_write_responses, todo))
    files = [j[0] for j in jobs[:-1]]
    per_file = len(questions) * args.samples
    total = per_file * len(files)
    print(f"val: {len(files)} files, {total:,} responses, "
          f"{sum(f.stat().st_size for f in files) / 1e9:.2f} GB "
          f"(generated in {time.perf_counter() - t0:.0f} s)", flush=True)

    home = work / size / "home"
    shutil.rmtree(home, ignore_errors=True)
    env = {**base_env, "BENCHLAKE_HOME": str(home), "RESPONSES_DIR": str(full)}
    ref, n = duckdb_reference(files)
    assert n == total, (n, total)
    started = time.time()
    run = benchlake("materialize", "--select", "group:video_val", env=env)
    table.add(f"val from scratch, {total:,} responses", run, ref,
              f"{total / run.wall:,.0f} resp/s", "materialize --select group:video_val")
    print(profile(run, home, started), flush=True)
    for what, sql in (("vv_best_checkpoints", "SELECT * FROM vv_best_checkpoints"),
                      ("vv_scores", "SELECT count(*) FROM vv_scores"),
                      ("vv_run_pairs", "SELECT count(*) FROM vv_run_pairs"),
                      ("vv_question_history", "SELECT count(*) FROM vv_question_history"),
                      ("vv_flips", "SELECT count(*) FROM vv_flips"),
                      ("vv_flip_groups", "SELECT count(*) FROM vv_flip_groups")):
        run = benchlake("sql", sql, "--format", "csv", env=env)
        rows = len(run.stdout.strip().splitlines()) - 1
        table.add(f"  first query: {what}", run, notes=f"sql \"{sql}\" -> {rows} row(s)"
                  if "count" not in sql else f"sql \"{sql}\" = {run.stdout.split()[-1]}")

    new = full / "run-0" / jobs[-1][0].name
    os.link(jobs[-1][0], new)
    try:
        ref, _ = duckdb_reference([new])
        started = time.time()
        run = benchlake("materialize", "--select", "group:video_val", env=env)
        table.add(f"val +1 checkpoint file, {per_file:,} responses", run, ref,
                  f"{per_file / run.wall:,.0f} resp/s", "materialize --select group:video_val")
        print(profile(run, home, started), flush=True)
        run = benchlake("sql", "SELECT * FROM vv_best_checkpoints", env=env)
        table.add("  then first query: vv_best_checkpoints", run)
        run = benchlake("export", "--out", str(work / size / "exports"), env=env)
        table.add(f"val export over {total + per_file:,} responses", run,
                  notes="benchlake export (target: ≤1.5 GB RSS at 250 checkpoints)")
    finally:
        new.unlink()


# --- judgments ---------------------------------------------------------------------------------

JUDGE_RUNS = 10  # copies of each demo judge run; the rest of the records are more attempts


def _copy(rec: dict, run: str, offset: int) -> dict:
    """A demo record in judge run `run`, its attempt numbers (and its stages') `offset` on."""
    stages = [{**st, "attempt": st["attempt"] + offset} for st in rec.get("stages", ())]
    return {**rec, "judge_run_id": run, "attempt": rec["attempt"] + offset,
            **({"stages": stages} if "stages" in rec else {})}


def _write_judgments(demo_judgments: Path, dest: Path, target: int, tag: str = "") -> int:
    """The demo's records repeated until `target` records, in files of 10,000, 100 and 1
    records (.jsonl, .jsonl, .json): over `JUDGE_RUNS` judge runs `<run>-<tag><k>` per demo
    run, then as further attempts in them (as many judge runs as a campaign has: the pair
    marts grow with their square); GT compilations repeated per judge run."""
    records = [json.loads(line) for f in sorted(demo_judgments.glob("*.jsonl"))
               for line in f.read_text().splitlines() if line.strip()]
    gts = [(f.name, json.loads(f.read_text())) for f in sorted(
        (demo_judgments / "gt_compilations").glob("*.json"))]
    copies = -(-target // len(records))
    stride = 1 + max(max([r["attempt"], *(st["attempt"] for st in r.get("stages", ()))])
                     for r in records)
    out = []
    for k in range(copies):
        for r in records:
            out.append(_copy(r, f"{r['judge_run_id']}-{tag}{k % JUDGE_RUNS}",
                             k // JUDGE_RUNS * stride))
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


def _json_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".json", ".jsonl"))


def _step_seconds(run: Run, home: Path) -> float:
    """The judgment step's own time in a `benchlake materialize` (its views and checks aside)."""
    import dagster as dg

    run_id = re.search(r"; run ([0-9a-f-]{36});", run.stderr).group(1)
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        step = next(s for s in instance.get_run_step_stats(run_id)
                    if s.step_key == "rvp_judgment_records")
    return step.end_time - step.start_time


def _step_rate(run: Run, home: Path, records: int) -> str:
    seconds = _step_seconds(run, home)
    return f"step rvp_judgment_records {seconds:.1f} s, {records / seconds:,.0f} rec/s"


def _versions_checked(home: Path) -> int:
    """How many judgment file versions the last materialization read and checked (the others
    were replayed from their parts)."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("raw_rvp_judgments"))
    return event.asset_materialization.metadata["file_versions_checked"].value


def bench_judgments(args: argparse.Namespace, work: Path, table: Table) -> None:
    from benchlake_demo import ensure_demo
    from dagster_project.settings import Settings

    demo = Settings.from_env({"BENCHLAKE_HOME": str(work.parent / "demo-home")})  # shared
    ensure_demo(demo)
    drop, empty = work / f"judgments-{args.judgments}", work / "empty"
    if not drop.exists():
        shutil.rmtree(drop.with_suffix(".tmp"), ignore_errors=True)
        _write_judgments(demo.demo_dir / "judgments", drop.with_suffix(".tmp"), args.judgments)
        drop.with_suffix(".tmp").rename(drop)
    empty.mkdir(exist_ok=True)
    home, candidates = work / "home", work / "candidates"
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(candidates, ignore_errors=True)  # the demo's, linked: a system is added below
    shutil.copytree(demo.candidates_root(), candidates, copy_function=os.link)
    env = {"BENCHLAKE_HOME": str(home), "RYNN_VP_SOURCE": demo.rynn_vp_source_or_demo(),
           "CANDIDATES_DIR": str(candidates), "JUDGMENTS_DIR": str(empty)}
    benchlake("materialize", "--select", "group:rynn_vp", env=env)  # the videos, untimed
    env["JUDGMENTS_DIR"] = str(drop)
    every, n = json_reference(_json_files(drop))
    print(f"judgments: reference: DuckDB parses {n:,} records in {every:.1f} s", flush=True)
    started = time.time()
    run = benchlake("materialize", "--select", "group:rynn_vp", env=env)
    table.add(f"judgments from scratch, {args.judgments:,} records", run, every,
              rate=f"{args.judgments / run.wall:,.0f} rec/s",
              notes="materialize --select group:rynn_vp (videos already done); "
                    + _step_rate(run, home, args.judgments))
    print(profile(run, home, started), flush=True)
    late = work / "late"
    shutil.rmtree(late, ignore_errors=True)
    _write_judgments(demo.demo_dir / "judgments", late, 10000 + 1000 + 9000, tag="late")
    added = [(late / "big-0.jsonl", drop / "late.jsonl")] + [
        (f, drop / "gt_compilations" / f"late-{f.name}")
        for f in (late / "gt_compilations").glob("*.json")]
    for src, dest in added:
        shutil.copy(src, dest)
    try:
        ref, _ = json_reference([dest for _, dest in added])
        started = time.time()
        run = benchlake("materialize", "--select", "group:rynn_vp", env=env)
        table.add("judgments +1 file, 10,000 records", run, ref,
                  rate=f"{10000 / run.wall:,.0f} rec/s",
                  notes="materialize --select group:rynn_vp; the file and its GT compilations "
                        "sort before 1,000 earlier files; " + _step_rate(run, home, 10000))
        print(profile(run, home, started), flush=True)
    finally:
        for _, dest in added:
            dest.unlink()
    # the file's removal, untimed: each workload below adds to the 60,000 records alone (timed
    # with the removal, a file added last also replays everything after the removed one)
    benchlake("materialize", "--select", "group:rynn_vp", env=env)
    # ... and a file that sorts after every other: what a harness naming its files in order adds
    end = work / "end"
    shutil.rmtree(end, ignore_errors=True)
    _write_judgments(demo.demo_dir / "judgments", end, 10000 + 1000 + 9000, tag="end")
    last = drop / "zz-end.jsonl"
    shutil.copy(end / "big-0.jsonl", last)
    try:
        ref, _ = json_reference([last])
        started = time.time()
        run = benchlake("materialize", "--select", "group:rynn_vp", env=env)
        table.add("judgments +1 file sorting last, 10,000", run, ref,
                  rate=f"{10000 / run.wall:,.0f} rec/s",
                  notes="materialize --select group:rynn_vp; " + _step_rate(run, home, 10000))
        print(profile(run, home, started), flush=True)
    finally:
        last.unlink()
    benchlake("materialize", "--select", "group:rynn_vp", env=env)  # the removal, untimed
    # ... and a new system's candidates (one system's, copied under a new name) before any
    # judgment of it: the context every judgment is checked against changes, and only the files
    # whose records it changes are checked again (none here). The reference: parsing every record
    # again, what checking every file again reads.
    system = sorted(p.name for p in candidates.iterdir() if p.is_dir())[-1]
    shutil.copytree(candidates / system, candidates / f"{system}-2", copy_function=os.link)
    started = time.time()
    run = benchlake("materialize", "--select", "group:rynn_vp", env=env)
    table.add("judgments, a new system's candidates", run, every,
              notes=f"materialize --select group:rynn_vp; {args.judgments:,} records kept; "
                    f"step rvp_judgment_records {_step_seconds(run, home):.1f} s, "
                    f"{_versions_checked(home)} file versions checked again; the new system's "
                    "candidates and evidence too")
    print(profile(run, home, started), flush=True)


# --- rynn_vp -----------------------------------------------------------------------------------

FULL_FPS, FULL_GOP = 25, 50  # 2 s per GOP
CLIP_GOPS = 2  # each base clip: 4 s at 640×360, encoded once


def _base_clips(folder: Path, n: int = 4) -> list[Path]:
    from dagster_project.media.encode import synthetic_frames, write_h264

    clips = [folder / f"clip-{k}.mp4" for k in range(n)]
    for k, clip in enumerate(clips):
        if not clip.exists():
            write_h264(clip, synthetic_frames(FULL_GOP * CLIP_GOPS, 640, 360, seed=900 + k),
                       fps=FULL_FPS, gop=FULL_GOP, preset="superfast")
    return clips


def _remux_long(clip: Path, dest: Path, n_gops: int, rotate: int) -> None:
    """`n_gops` GOPs of `clip`, starting at its GOP `rotate`, repeated in a loop: copied packets
    with shifted timestamps (no re-encoding), written atomically."""
    import av

    with av.open(str(clip)) as src:
        stream = src.streams.video[0]
        gops: list[list] = []
        for pkt in src.demux(stream):
            if pkt.size == 0:
                continue
            if pkt.is_keyframe:
                gops.append([])
            gops[-1].append((pkt.pts, pkt.dts, bytes(pkt), pkt.is_keyframe))
        step = gops[1][0][0] - gops[0][0][0]  # one GOP, in the stream's time base
        tmp = dest.with_name(f".{dest.name}.tmp")
        with av.open(str(tmp), "w", format="mp4") as out:
            ostream = out.add_stream_from_template(stream)
            for i in range(n_gops):
                j = (i + rotate) % len(gops)
                for pts, dts, data, key in gops[j]:
                    pkt = av.Packet(data)
                    pkt.pts, pkt.dts = pts + (i - j) * step, dts + (i - j) * step
                    pkt.time_base, pkt.stream, pkt.is_keyframe = stream.time_base, ostream, key
                    out.mux(pkt)
    tmp.rename(dest)


def _scale_planning(planning: dict[str, str], factor: float) -> dict[str, str]:
    def at(t: str) -> str:
        return f"{float(t.rstrip('s')) * factor:.1f}s"

    return {"-".join(at(t) for t in key.rsplit("-", 1)): label for key, label in planning.items()}


def _clone_cases(demo_root: Path, demo_cands: Path, snapshot: Path, cands: Path,
                 n: int, full_size: bool) -> None:
    """`n` cases cloned from the demo's (case ids renumbered in their last field, task.json
    rewritten, SHA256SUMS.txt recomputed), each with a copy of the demo case's candidates.
    `full_size`: each GT video replaced by a distinct 20-122 s 640×360 one (remuxed from base
    clips), its initial.png its first frame, its annotation intervals stretched to fit."""
    import av

    from benchlake_demo.rynn_vp import write_sha256sums

    shutil.copytree(demo_root, snapshot, ignore=shutil.ignore_patterns("cases"))
    originals = sorted((demo_root / "cases").iterdir())
    clips = _base_clips(snapshot.parent / "clips") if full_size else []
    # distinct (clip, rotation, length) per case: 4 × 2 × 51 > any case count asked for
    shapes = [(c, r, g) for c in range(len(clips)) for r in range(CLIP_GOPS)
              for g in range(10, 62)]
    random.Random(26).shuffle(shapes)
    for k in range(n):
        src = originals[k % len(originals)]
        case_id = src.name.rsplit("-", 1)[0] + f"-{100 + k:03d}"  # unique per clone
        dest = snapshot / "cases" / case_id
        shutil.copytree(src, dest)
        task = json.loads((dest / "task.json").read_text())
        (dest / "task.json").write_text(json.dumps({**task, "task_id": case_id}, indent=2))
        if full_size:
            clip, rotate, n_gops = shapes[k]
            with av.open(str(src / "gt.mp4")) as old:
                before = float(old.streams.video[0].frames) / float(
                    old.streams.video[0].average_rate)
            _remux_long(clips[clip], dest / "gt.mp4", n_gops, rotate)
            with av.open(str(dest / "gt.mp4")) as new:
                next(new.decode(video=0)).to_image().save(dest / "initial.png", format="PNG")
            ann = json.loads((dest / "gt_annotations.json").read_text())
            ann["planning"] = _scale_planning(ann["planning"],
                                              n_gops * FULL_GOP / FULL_FPS / before)
            (dest / "gt_annotations.json").write_text(json.dumps(ann, indent=2) + "\n")
        for system in sorted(p for p in demo_cands.iterdir() if p.is_dir()):
            if (system / src.name).is_dir():
                shutil.copytree(system / src.name, cands / system.name / case_id)
    write_sha256sums(snapshot)


DECODE_ALL = """
import av, sys
n = 0
for path in sys.argv[1:]:
    with av.open(path) as c:
        for _ in c.decode(video=0):
            n += 1
print(n)
"""


def _stamps(home: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (home / "evidence").rglob("*.jpg")}


def bench_rynn_vp(args: argparse.Namespace, work: Path, table: Table) -> None:
    from benchlake_demo import ensure_demo
    from dagster_project.settings import Settings

    demo = Settings.from_env({"BENCHLAKE_HOME": str(work.parent / "demo-home")})  # shared
    ensure_demo(demo)
    size = work / f"{'full' if args.full_size else 'demo'}-{args.cases}"
    snapshot, cands, empty = size / "Rynn-VP", size / "candidates", work / "empty"
    if not snapshot.exists():
        tmp = size.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        _clone_cases(Path(demo.rynn_vp_source_or_demo()), demo.candidates_root(),
                     tmp / "Rynn-VP", tmp / "candidates", args.cases, args.full_size)
        shutil.rmtree(size, ignore_errors=True)
        tmp.rename(size)
    empty.mkdir(exist_ok=True)
    home = size / "home"
    shutil.rmtree(home, ignore_errors=True)
    env = {"BENCHLAKE_HOME": str(home), "RYNN_VP_SOURCE": str(snapshot),
           "CANDIDATES_DIR": str(cands), "JUDGMENTS_DIR": str(empty)}
    videos = sorted(cands.glob("*/*/candidate.mp4"))
    gts = sorted(snapshot.glob("cases/*/gt.mp4"))
    n_eval = len([p for p in cands.glob("*/*") if p.is_dir()])
    ref = python(DECODE_ALL, *map(str, gts + videos))
    frames = int(ref.stdout.strip())
    print(f"rynn_vp: {args.cases} cases, {n_eval} evaluations, {len(videos)} candidate videos; "
          f"reference: PyAV decodes {frames:,} frames in {ref.wall:.1f} s", flush=True)
    started = time.time()
    first = benchlake("materialize", "--select", "group:rynn_vp", env=env)
    table.add(f"Rynn-VP first run, {args.cases} cases", first, ref.wall,
              f"{frames / first.wall:,.0f} frames/s",
              f"{n_eval} evaluations, {len(videos)} candidate videos"
              + (", full size" if args.full_size else ""))
    print(profile(first, home, started), flush=True)
    before, started = _stamps(home), time.time()
    run = benchlake("materialize", "--select", "group:rynn_vp", env=env)
    now = _stamps(home)
    redone = sum(now.get(p) != t for p, t in before.items())
    table.add("Rynn-VP again, nothing changed", run, ref.wall,
              notes=f"{redone} evidence images rewritten; {_of_first(run, first)}")
    print(profile(run, home, started), flush=True)
    target, donor = videos[0], videos[-1]
    saved = target.read_bytes()
    shutil.copy(donor, target)
    try:
        before, started = _stamps(home), time.time()
        run = benchlake("materialize", "--select", "group:rynn_vp", env=env)
        after = _stamps(home)
    finally:
        target.write_bytes(saved)
    redone_evals = {Path(p).parent.name + "/" + Path(p).parent.parent.name
                    for p, t in before.items() if after.get(p) != t and "/P" in p}
    table.add("Rynn-VP again, one candidate changed", run, ref.wall,
              notes=f"panels rewritten for {len(redone_evals)} evaluation(s); "
                    f"{_of_first(run, first)}")
    print(profile(run, home, started), flush=True)


def _of_first(run: Run, first: Run) -> str:
    """A run again as a share of the first (the targets: nothing changed ≤ 10 %, one candidate
    changed ≤ 15 %)."""
    return f"{100 * run.wall / first.wall:.1f} % of the first run"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["val", "judgments", "rynn_vp"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--checkpoints", type=int, default=25)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--judgments", type=int, default=60_000)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--full-size", action="store_true",
                    help="Rynn-VP GT videos of 20-122 s at 640×360 (else the demo's clips)")
    ap.add_argument("--dir", type=Path, help="work folder, kept (default: a temp folder)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="benchlake-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    table = Table()
    benches = {"val": bench_val, "judgments": bench_judgments, "rynn_vp": bench_rynn_vp}
    for name, fn in benches.items():
        if args.only in (None, name):
            fn(args, work / name, table)
    table.print()
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
