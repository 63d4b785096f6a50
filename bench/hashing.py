"""Benchmark snapshot verification against GNU ``sha256sum -c``.

Usage: python bench/hashing.py [--mb 1024] [--files 8] [--runs 3] [--dir /some/tmp]

Exits non-zero if ``verify_snapshot(workers=2)`` reaches less than 0.9x sha256sum's throughput.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# Allow running as a plain script from a checkout without an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster_project.rynn_vp.checksums import hash_files, verify_snapshot  # noqa: E402

TARGET_RATIO = 0.9
BLOCK = 1 << 20


def generate(root: Path, total_mb: int, n_files: int) -> list[str]:
    """Write n_files totalling total_mb MiB; one urandom block reused with a varying prefix."""
    base = bytearray(os.urandom(BLOCK))
    blocks_per_file = [total_mb // n_files + (i < total_mb % n_files) for i in range(n_files)]
    rels: list[str] = []
    counter = 0
    for i, n_blocks in enumerate(blocks_per_file):
        rel = f"cases/case {i:03d}/video.bin"  # spaces, like the real snapshot
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            for _ in range(n_blocks):
                # A unique prefix per block keeps blocks/files distinct without more urandom.
                base[:8] = counter.to_bytes(8, "little")
                counter += 1
                f.write(base)
        rels.append(rel)
    digests = hash_files(root, rels)
    (root / "SHA256SUMS.txt").write_text(
        "".join(f"{digests[r]}  {r}\n" for r in rels), encoding="utf-8"
    )
    return rels


def warm_cache(root: Path, rels: list[str]) -> None:
    """Read every file once so all contenders hash from the page cache."""
    buf = bytearray(BLOCK)
    for rel in rels:
        with open(root / rel, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def run_gnu(root: Path) -> None:
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS.txt"], cwd=root, check=True)


def run_ours(root: Path, workers: int) -> None:
    bad = [s for s in verify_snapshot(root, workers=workers) if s.status != "ok"]
    if bad:
        raise SystemExit(f"verify_snapshot(workers={workers}) reported problems: {bad[:3]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="total MiB to generate")
    parser.add_argument("--files", type=int, default=8, help="number of files")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per contender")
    parser.add_argument("--dir", type=Path, default=None, help="parent dir for the temp data")
    args = parser.parse_args()
    if args.mb < 1 or args.files < 1 or args.runs < 1:
        parser.error("--mb, --files and --runs must be positive")
    if shutil.which("sha256sum") is None:
        print("GNU sha256sum not found on PATH", file=sys.stderr)
        return 2

    contenders: dict[str, Callable[[Path], None]] = {
        "sha256sum -c": run_gnu,
        "ours workers=1": lambda r: run_ours(r, 1),
        "ours workers=2": lambda r: run_ours(r, 2),
    }
    with tempfile.TemporaryDirectory(prefix="benchlake-hash-", dir=args.dir) as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        rels = generate(root, args.mb, args.files)
        size_mib = sum((root / r).stat().st_size for r in rels) / BLOCK
        print(
            f"generated {len(rels)} files, {size_mib:.0f} MiB in "
            f"{time.perf_counter() - t0:.1f}s; cpus={os.cpu_count()}"
        )
        warm_cache(root, rels)

        times: dict[str, list[float]] = {name: [] for name in contenders}
        # Interleave contenders per round so drift (thermal, noisy neighbours) hits all alike.
        for _ in range(args.runs):
            for name, fn in contenders.items():
                start = time.perf_counter()
                fn(root)
                times[name].append(time.perf_counter() - start)

    medians = {name: statistics.median(ts) for name, ts in times.items()}
    gnu = medians["sha256sum -c"]
    print(f"\n{'contender':<16} {'median s':>9} {'MiB/s':>9} {'ratio':>7}")
    for name, secs in medians.items():
        # Throughput ratio vs sha256sum on the same bytes: >1 means we are faster.
        ratio = gnu / secs
        print(f"{name:<16} {secs:>9.3f} {size_mib / secs:>9.1f} {ratio:>7.2f}")

    ratio2 = gnu / medians["ours workers=2"]
    verdict = "PASS" if ratio2 >= TARGET_RATIO else "FAIL"
    print(f"\n{verdict}: workers=2 ratio {ratio2:.2f} (target >= {TARGET_RATIO})")
    return 0 if ratio2 >= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
