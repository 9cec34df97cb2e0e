"""Callers at once, for the benchmarks that time a shared engine under concurrency: each of
`threads` threads waits at one barrier, then runs its share; their timings are joined."""

from __future__ import annotations

import threading
from collections.abc import Callable


def at_once(threads: int, share: Callable[[int], list[float]]) -> list[float]:
    """`share(i)` on thread i for i < `threads`, all released together; every timing."""
    parts: list[list[float]] = [[] for _ in range(threads)]
    gate = threading.Barrier(threads)

    def caller(i: int) -> None:
        gate.wait()
        parts[i] = share(i)

    workers = [threading.Thread(target=caller, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return [ms for part in parts for ms in part]
