"""Judgment ingestion in bounded memory: one JSONL file of 10, 40 and 100 MB, side by side.

    python bench/judgments.py [--sizes 10 40 100] [--dir DIR]

The files hold the demo's valid judgment records repeated over judge runs `<run>-b<k>` (so every
record is distinct and accepted). Each size is ingested from scratch, in a fresh process, into a
copy of a materialized demo home: the judgment assets only (`JUDGMENTS`, what the sensor runs),
checks aside. Printed per size: records, MB, the seconds of the asset's step (reading,
checking, writing the tables), records/s, and the peak RSS of the whole process (`ru_maxrss`,
its children included); first the same for the demo's own judgments alone, the floor every run
pays (Python, Dagster, the definitions).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

JUDGMENTS = ("key:raw_rvp_judgment_files or key:raw_rvp_judgments or key:raw_rvp_hallucinations"
             " or key:raw_rvp_judgment_rejects or key:raw_rvp_gt_compilations or "
             "key:raw_rvp_stages")
STEP = "rvp_judgment_records"  # the multi-asset that writes them


def step_main() -> None:
    """In the fresh process: materialize the judgment assets, print the figures as JSON."""
    import warnings

    warnings.filterwarnings("ignore")
    from dagster_project.runner import materialize
    from dagster_project.settings import Settings

    outcome = materialize(Settings.from_env(), JUDGMENTS, checks=False)
    if not outcome.success:
        raise SystemExit("the judgment assets failed")
    # the asset's step, from its start and success events (the run's setup aside)
    times = {e.dagster_event.event_type_value: e.timestamp
             for e in outcome.instance.all_logs(outcome.run_id)
             if e.is_dagster_event and e.dagster_event.step_key == STEP}
    peak_kb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(json.dumps({"seconds": times["STEP_SUCCESS"] - times["STEP_START"],
                      "peak_kb": peak_kb}))


def run_step(env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--step"], env={**os.environ, **env},
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"step failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def valid_demo_records(settings) -> list[dict]:
    """The demo's judgment records that are accepted (the demo plants one invalid line)."""
    from dagster_project.rynn_vp.judgment_parts import eval_context
    from dagster_project.rynn_vp.judgment_records import judgment_reasons

    ctx = eval_context(settings.home)
    out = []
    for f in sorted((settings.demo_dir / "judgments").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and not judgment_reasons(rec, ctx, lambda _: None):
                out.append(rec)
    return out


def write_jsonl(records: list[dict], path: Path, megabytes: int) -> int:
    """`records` repeated over judge runs `<run>-b<k>` until the file holds `megabytes` MB;
    the number of records written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    limit, size, n, k = megabytes * 2**20, 0, 0, 0
    with path.open("w", encoding="utf-8") as fh:
        while size < limit:
            for rec in records:
                line = json.dumps({**rec, "judge_run_id": f"{rec['judge_run_id']}-b{k}"},
                                  sort_keys=True) + "\n"
                fh.write(line)
                size, n = size + len(line.encode()), n + 1
            k += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 40, 100])
    ap.add_argument("--dir", type=Path, help="work folder (kept: the demo home is reused)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-judgments-"))
    import warnings

    warnings.filterwarnings("ignore")
    from benchlake_demo import ensure_demo
    from dagster_project.runner import materialize
    from dagster_project.settings import Settings

    base = work / "demo-home"
    demo = Settings.from_env({"BENCHLAKE_HOME": str(base)})
    if not (base / "tables").exists():
        ensure_demo(demo)
        assert materialize(demo, "not group:reports", checks=False).success
    records = valid_demo_records(demo)
    rows = []
    for mb in [0, *args.sizes]:
        drop = work / f"drop-{mb}"
        if mb == 0:
            drop, n, size = demo.demo_dir / "judgments", 0, 0
        else:
            n = write_jsonl(records, drop / f"bench-{mb}mb.jsonl", mb)
            size = (drop / f"bench-{mb}mb.jsonl").stat().st_size
        home = work / "home"
        shutil.rmtree(home, ignore_errors=True)
        shutil.copytree(base, home, ignore=shutil.ignore_patterns("dagster", "judgment_parts"))
        env = {"BENCHLAKE_HOME": str(home), "RYNN_VP_SOURCE": demo.rynn_vp_source_or_demo(),
               "CANDIDATES_DIR": str(demo.candidates_root()), "JUDGMENTS_DIR": str(drop)}
        rep = run_step(env)
        rows.append((mb, n, size, rep["seconds"], rep["peak_kb"] * 1024))
        if mb:
            shutil.rmtree(drop)
    print(f"{'input':<22}{'records':>9}{'MB':>8}{'seconds':>9}{'records/s':>11}"
          f"{'peak RSS MB':>13}{'over demo MB':>14}")
    floor = rows[0][4]
    for mb, n, size, secs, rss in rows:
        label = "demo judgments only" if mb == 0 else f"one {mb} MB JSONL"
        rate = f"{n / secs:,.0f}" if n else "-"
        print(f"{label:<22}{n:>9,}{size / 2**20:>8.1f}{secs:>9.1f}{rate:>11}"
              f"{rss / 2**20:>13.0f}{(rss - floor) / 2**20:>14.0f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--step"]:
        step_main()
    else:
        main()
