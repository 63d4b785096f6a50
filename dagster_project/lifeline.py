"""Child processes that end with the benchlake process that started them.

A `kill -9` of `benchlake materialize` gives it no chance to stop what it started: pool workers
and dbt would be adopted by init and go on writing. So each child asks the kernel to SIGKILL it
when its parent ends (Linux's `prctl(PR_SET_PDEATHSIG)`, kept across `exec`), and kills itself
at once if the parent ended before it asked. The kernel sends the signal when the *thread* that
started the child ends, so children are started by a thread that waits for them (a pool in a
`with` block, a subprocess waited on). Elsewhere than Linux this is a no-op. No Dagster import.

Pool workers do it in their initializer (`process_pool`); a program such as dbt is run through
this module: `python -m dagster_project.lifeline PROGRAM ARGS...` asks, then execs PROGRAM in
the same process, its parent named by `PARENT_ENV` in its environment (`command`, `env`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the wrapper that execs dbt stays quick to start
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.context import BaseContext

PARENT_ENV = "BENCHLAKE_PARENT_PID"
_MODULE = "dagster_project.lifeline"  # `__name__` is `__main__` when run with -m
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with(parent: int) -> None:
    """Have this process killed when `parent`, the process that started it, ends; kill it now
    if `parent` has already ended (then no signal would come)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _initialize(parent: int, initializer: Callable[..., Any] | None, initargs: tuple) -> None:
    from dagster_project.interpreter import tune_gc

    die_with(parent)
    tune_gc()  # a worker parses and scores millions of records
    if initializer is not None:
        initializer(*initargs)


def process_pool(workers: int, *, mp_context: BaseContext | None = None,
                 initializer: Callable[..., Any] | None = None,
                 initargs: tuple = ()) -> ProcessPoolExecutor:
    """A `ProcessPoolExecutor` whose workers die with this process (use it in a `with` block
    of the thread that submits: the workers are started by the first submit)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = mp_context or multiprocessing.get_context()
    if context.get_start_method() == "forkserver":  # the workers would be the server's children
        context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_initialize,
                               initargs=(os.getpid(), initializer, initargs))


def command(program: str) -> list[str]:
    """`program` run so that it dies with the process that starts it, which must pass `env()`
    in its environment."""
    return [sys.executable, "-m", _MODULE, program]


def env() -> dict[str, str]:
    """What a child started by this process through `command` needs to know its parent."""
    return {PARENT_ENV: str(os.getpid())}


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(f"usage: {PARENT_ENV}=PID python -m {_MODULE} PROGRAM [ARGS...]")
    # Without the variable, the parent is the one there is now (it may already be init).
    die_with(int(os.environ.get(PARENT_ENV) or os.getppid()))
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
