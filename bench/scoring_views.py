"""Rynn-VP scoring views at scale: 200 cases × 100 systems × 3 judge runs (60,000 final
judgments plus retries), generated in the published table schemas; each leaderboard and
breakdown view timed (median of 5, fully fetched). Target: each ≤ 100 ms.

The views are the dbt models of `sql/`, built by `dbt run` (only the scoring views and what they
read) into a temporary `benchlake.duckdb` over a temporary home whose raw tables are the
generated ones (`tables/raw/<table>.parquet`); the timed queries run on that file.

    python bench/scoring_views.py        (also run by bench/scoring.py)
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


import duckdb  # noqa: E402

from dagster_project.rynn_vp.judgment_records import METRIC_COLUMNS  # noqa: E402
from dagster_project.tables import raw_schema, rows_to_table, write_table  # noqa: E402

SCENES = ["Bedroom", "Living_Room", "Office_Space", "Kitchen", "Bathroom", "Home Office"]
VIEWS = ["rvp_candidate_scores", "rvp_leaderboard", "rvp_by_scene", "rvp_by_source_group",
         "rvp_metric_means", "rvp_hallucination_rates"]
TARGET_MS = 100.0
SQL_DIR = Path(__file__).resolve().parent.parent / "sql"


def generate(tables: Path, n_cases: int = 200, n_systems: int = 100, n_runs: int = 3) -> int:
    rng = random.Random(7)
    cases = []
    for i in range(n_cases):
        scene = SCENES[i % len(SCENES)]
        source = f"source{1 + i % 2}_{1 + (i // 2) % 2}"
        cases.append({"case_id": f"{source}-{scene}-Room_{i % 9:02d}-Task_{i:02d}-Variant_01-001",
                      "instruction": f"task {i}", "source_group": source, "scene": scene,
                      "room_id": f"Room_{i % 9:02d}", "has_explicit_plan": i % 50 == 0,
                      "n_intervals": 11})
    systems = [f"system-{s:03d}" for s in range(n_systems)]
    cands, judgments = [], []
    for s, system in enumerate(systems):
        modality = "images" if s % 10 == 0 else "video"
        for c in cases:
            if rng.random() < 0.03:
                continue  # a missing candidate
            cands.append({"system": system, "case_id": c["case_id"], "modality": modality,
                          "ok": True, "path": "x", "fingerprint": "0" * 64})
            for r in range(n_runs):
                attempts = 2 if rng.random() < 0.05 else 1
                for a in range(1, attempts + 1):
                    row = {"system": system, "case_id": c["case_id"],
                           "evaluation_id": f"{system}/{c['case_id']}",
                           "judge_run_id": f"run-{r}", "attempt": a,
                           "attempt_kind": "initial" if a == 1 else "retry",
                           "is_final": a == attempts, "input_modality": modality,
                           "has_explicit_plan": c["has_explicit_plan"],
                           "n_hallucinations": int(rng.random() < 0.1)}
                    for metric, col in METRIC_COLUMNS.items():
                        if metric == "PI-5" and not c["has_explicit_plan"]:
                            continue
                        row[col] = round(rng.uniform(20, 95), 1)
                    judgments.append(row)
    home = tables.parent.parent  # tables/raw/<table>.parquet
    for name, rows in (("rvp_cases", cases), ("rvp_candidates", cands),
                       ("rvp_judgments", judgments)):
        write_table(rows_to_table(rows, raw_schema(name)), tables / f"{name}.parquet", home=home)
    return len(judgments)


def build_views(home: Path, database: Path) -> None:
    """`dbt run` of the benchmarked views and their ancestors into `database` (in a child
    process: dbt-duckdb keeps its connection to the file open in the process that ran it)."""
    env = {**os.environ, "BENCHLAKE_HOME": str(home), "BENCHLAKE_DBT_DATABASE": str(database)}
    dbt = Path(sys.executable).with_name("dbt")
    subprocess.run(
        [str(dbt), "--quiet", "run", "--project-dir", str(SQL_DIR), "--profiles-dir", str(SQL_DIR),
         "--target-path", str(database.parent / "target"),
         "--log-path", str(database.parent / "logs"),
         "--select", *(f"+{v}" for v in VIEWS)], env=env, check=True)


def bench_views() -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        tables = home / "tables" / "raw"
        tables.mkdir(parents=True)
        n = generate(tables)
        database = home / "dbt" / "benchlake.duckdb"
        database.parent.mkdir()
        build_views(home, database)
        con = duckdb.connect(str(database), read_only=True)
        print(f"\nscoring views over 200 cases x 100 systems x 3 judge runs ({n:,} judgments)")
        print(f"{'view':<26}{'rows':>9}{'median ms':>12}")
        ok = True
        for view in VIEWS:
            times = []
            for _ in range(6):
                start = time.perf_counter()
                rows = con.execute(f"SELECT * FROM {view}").to_arrow_table()
                times.append((time.perf_counter() - start) * 1000)
            ms = statistics.median(times[1:])  # the first run warms the Parquet cache
            ok &= ms <= TARGET_MS
            print(f"{view:<26}{rows.num_rows:>9}{ms:>12.1f}")
        print(f"target: each <= {TARGET_MS:.0f} ms: {'met' if ok else 'MISSED'}")
        return ok


if __name__ == "__main__":
    sys.exit(0 if bench_views() else 1)
