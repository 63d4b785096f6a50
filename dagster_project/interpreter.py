"""The garbage collector of a benchlake process, tuned for what it is: a short run that loads
Dagster, dbt and the definitions (some 500,000 objects that live as long as the process) and
then makes many short-lived ones.

With CPython's defaults (700, 10, 10) the collector scans those long-lived objects again and
again: measured on 2 cores with py-spy, 2.0 s of a 7 s `benchlake materialize` with nothing to
do went to collections during the run, and 1.3 s more to the collection the interpreter runs at
exit. Larger thresholds collect the young generation ~15× less often (cycles are still freed,
later), and freezing every object at exit leaves the final collection nothing to scan: the
process is ending, its memory goes back to the system either way. Nothing else changes:
reference counting still frees most objects at once. `bench/scale.py` measured the effect
(README, Speed).
"""

from __future__ import annotations

import atexit
import gc

THRESHOLDS = (10_000, 20, 100)  # generation 0 allocations, then young and old collections


def tune_gc() -> None:
    """`THRESHOLDS` for this process, and no full collection at its exit (once: the CLI tunes,
    then imports the definitions, which tune too)."""
    if gc.get_threshold() == THRESHOLDS:
        return
    gc.set_threshold(*THRESHOLDS)
    atexit.register(gc.freeze)
