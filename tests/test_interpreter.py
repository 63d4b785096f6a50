"""The collector of a benchlake process (`dagster_project/interpreter.py`): tuned, and still
freeing cycles."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap

from dagster_project.interpreter import THRESHOLDS

_CHILD = textwrap.dedent("""
    import gc, weakref
    from dagster_project.interpreter import THRESHOLDS, tune_gc
    tune_gc()
    assert gc.get_threshold() == THRESHOLDS, gc.get_threshold()
    freed = []
    class Node:
        pass
    for i in range(100):  # cycles nobody refers to: only the collector frees them
        a, b = Node(), Node()
        a.other, b.other = b, a
        weakref.finalize(a, freed.append, i)
        del a, b
    keep = [[j] for j in range(5 * THRESHOLDS[0])]  # allocations past the young threshold
    print(len(freed))
""")


def test_cycles_are_still_freed_past_the_tuned_threshold() -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          check=True)
    assert int(done.stdout) == 100, done.stderr


def test_the_command_and_the_code_location_run_tuned() -> None:
    [script] = [e for e in importlib.metadata.entry_points(group="console_scripts")
                if e.name == "benchlake"]
    assert script.value == "dagster_project.cli:main"  # main tunes, then runs the CLI
    done = subprocess.run(
        [sys.executable, "-c", "import gc, dagster_project.definitions; print(gc.get_threshold())"],
        capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(THRESHOLDS)
