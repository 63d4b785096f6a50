"""Judgment ingestion holds a batch, not the records: four times the records (many batches
each) must not cost four times the memory.

Each size is read, checked into its part and written to the tables in a fresh process, with
small batches and row groups (so that a thousand records are many of each). Two measures of
that process: its peak RSS (`VmHWM`: everything, DuckDB included) and, counted exactly,
what Python (tracemalloc) and Arrow allocated at their peaks; neither depends on how busy the
machine is. Holding every record (as the ingestion once did: ~10 bytes of memory per byte of
input) grows them by several times the extra input; what may grow is the index of the records
seen (a few hundred bytes per record), a small fraction of a record here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.rynn_vp.test_judgment_records import record

BATCH = 100  # rows per batch and per row group in the measured process
NOTES = "n" * 20_000  # a long free-text field: a record is ~20 KB, its index entry far less

_MEASURE = textwrap.dedent("""
    import json, sys, tracemalloc
    from pathlib import Path
    import pyarrow as pa
    import dagster_project.rynn_vp.judgment_parts as parts
    import dagster_project.rynn_vp.judgment_replay as replay
    import dagster_project.rynn_vp.judgments as judgments
    from dagster_project.rynn_vp.judgment_records import SourceFile
    from tests.rynn_vp.test_judgment_records import CTX
    parts.BATCH_ROWS = replay.BATCH_ROWS = judgments.BATCH_ROWS = judgments.ROW_GROUP_ROWS = {batch}
    parts.PARALLEL_BYTES = 1 << 62  # checked in this process, whose peak is measured
    path, work = Path(sys.argv[1]), Path(sys.argv[2])
    files = [SourceFile(path.name, 1, sys.argv[3], path)]
    tracemalloc.start()
    found, _ = parts.sync_parts(parts.judgment_store(work / "cache"), files, CTX)
    stores = judgments.judgment_table_stores(work)
    written = judgments.write_tables(files, CTX, stores, work, found)
    peak = tracemalloc.get_traced_memory()[1] + pa.default_memory_pool().max_memory()
    # VmHWM: this process image's own peak. ru_maxrss would not do: Linux carries the
    # pre-exec image's peak over an exec, and a forked pytest holds hundreds of MB.
    rss = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
    print(json.dumps({{"traced": peak, "rss": rss, "rows": written.rows["rvp_judgments"]}}))
""").format(batch=BATCH)


def _measure(tmp: Path, n: int) -> dict[str, int]:
    """Peak `rss` and `traced` bytes, `input` bytes and `rows` of judgments written, for a file
    of `n` distinct valid records."""
    import hashlib

    work = tmp / f"n{n}"
    work.mkdir()
    lines = [json.dumps(record(judge_run_id=f"run-{i}", notes=NOTES)) for i in range(n)]
    data = ("\n".join(lines) + "\n").encode()
    path = work / "judgments.jsonl"
    path.write_bytes(data)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(work),
                           hashlib.sha256(data).hexdigest()], cwd=root, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "input": len(data)}


def test_four_times_the_records_do_not_cost_four_times_the_memory(tmp_path):
    n = 3 * BATCH
    one, four = _measure(tmp_path, n), _measure(tmp_path, 4 * n)
    assert (one["rows"], four["rows"]) == (n, 4 * n)  # every record accepted: all were handled
    extra = four["input"] - one["input"]
    mb = {k: f"{one[k] / 2**20:.1f} MB -> {four[k] / 2**20:.1f} MB" for k in ("rss", "traced")}
    why = f"{n} -> {4 * n} records, +{extra / 2**20:.1f} MB of input: {mb}"
    assert four["traced"] - one["traced"] < extra / 4, why
    assert four["rss"] - one["rss"] < extra, why  # RSS is coarser: a page, an arena
