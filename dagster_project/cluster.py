"""The per-item work on a Ray cluster (`BENCHLAKE_RAY_ADDRESS`), for `parts.fan_out`.

Each job (a Rynn-VP case's evidence, a val video's frames) is one Ray task of one CPU that
writes its own part and files under the home, as a local worker process does, and returns what
the local worker returns. So the home must be a path every Ray worker sees (a shared
filesystem); the driver (the Dagster step) submits the jobs, gathers them as they finish
(`ray.wait`), logs progress and writes nothing a worker wrote. A worker that dies (killed, out
of memory, its node lost) has its task run again by Ray (`max_retries`): a part is written by
rename, so a retried task writes the same bytes the first would have.

Ray is imported only here, and only when an address is set (the `ray` extra). No Dagster
import: the domain modules call it through `parts.fan_out`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# Retries of a task whose worker died (Ray's default is 3 for tasks): an exception raised by
# the job itself is not retried (it would fail again), it fails the step as locally.
MAX_RETRIES = 3


def connect(address: str) -> None:
    """Join the cluster at `address` (`auto`, `ray://host:port` or `host:port`) once per
    process. Workers import benchlake from their own environment (installed there as on the
    driver, like verl's), so no code is shipped."""
    import ray

    if ray.is_initialized():
        return
    ray.init(address=address, namespace="benchlake", log_to_driver=False,
             logging_level="WARNING", configure_logging=False)


def fan_out(build: Callable[[Any], Any], jobs: Sequence[Any], address: str,
            log: Callable[[str], None] | None = None) -> Iterator[Any]:
    """`build` of every job as a Ray task on the cluster at `address`, results as they finish;
    progress (done / total, rate, what is still running or queued) through `log` every ~10 s
    and at the end."""
    import ray

    connect(address)
    task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(build)
    pending = [task.remote(job) for job in jobs]
    total, done, started = len(pending), 0, time.monotonic()
    said = started
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=10.0)
        for ref in ready:
            yield ray.get(ref)  # an exception of the job is raised here, as locally
            done += 1
        now = time.monotonic()
        if log is not None and (now - said >= 10.0 or not pending):
            said = now
            rate = done / max(now - started, 1e-9)
            log(f"ray: {done}/{total} done, {rate:.2f}/s, {len(pending)} running or queued "
                f"on {address}")

