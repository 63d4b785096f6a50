"""Ingest time of the video-val suite: the demo parquets (30 rows) and a generated set of the
published size (5,645 rows in the card's schema, cycling over the demo videos).

    python bench/video_val_ingest.py

Times, side by side in one run: reading + validating the parquets alone, and the whole
`group:video_val` materialization (questions, remap, video probes, frame plan) in-process.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

from benchlake_demo import ensure_demo  # noqa: E402
from benchlake_demo.video_val import generate_full_size_parquets  # noqa: E402
from dagster_project.runner import materialize  # noqa: E402
from dagster_project.settings import Settings  # noqa: E402
from dagster_project.video_val.read import read_val_parquet  # noqa: E402
from dagster_project.video_val.schema import SOURCES  # noqa: E402


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def read_all(folder: Path) -> int:
    return sum(len(read_val_parquet(folder / name, ds).rows) for name, ds in SOURCES.items())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        demo = Settings.from_env({"BENCHLAKE_HOME": f"{tmp}/demo-home"})
        ensure_demo(demo)
        full_dir = Path(tmp) / "full"
        t_gen, _ = timed(lambda: generate_full_size_parquets(full_dir))
        full = Settings.from_env({
            "BENCHLAKE_HOME": f"{tmp}/full-home",
            "VIDEO_VAL_SOURCE": str(full_dir),
            "VIDEO_VAL_PREFIX_MAP": demo.video_val_prefix_map_or_demo(),
        })
        materialize(demo, "group:video_val", checks=False)  # warm-up: imports, first run
        rows = []
        for label, settings, folder in (("demo", demo, Path(demo.video_val_source_or_demo())),
                                        ("5,645-row set", full, full_dir)):
            t_read, n = timed(lambda f=folder: read_all(f))
            t_mat, result = timed(lambda s=settings: materialize(s, "group:video_val",
                                                                 checks=False))
            assert result.success
            rows.append((label, n, t_read, t_mat))
        print(f"generated the 5,645-row parquets in {t_gen:.2f} s")
        print(f"{'input':<16}{'rows':>8}{'read+validate s':>18}{'materialize s':>16}")
        for label, n, t_read, t_mat in rows:
            print(f"{label:<16}{n:>8}{t_read:>18.3f}{t_mat:>16.2f}")


if __name__ == "__main__":
    main()
