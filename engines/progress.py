"""Progress lines for long work (model loading, conversion, training, benchmarks).

Logged through `logging`, so the server shows one line per model at start-up and stays quiet
otherwise; CLIs get the same lines on stderr.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def load_step(logger: logging.Logger, what: str) -> Iterator[None]:
    """Log `loading <what>` before and `loaded <what> in N s` after a blocking step."""
    logger.info("loading %s", what)
    start = time.perf_counter()
    yield
    logger.info("loaded %s in %.1f s", what, time.perf_counter() - start)


class Progress:
    """Log `label: i/total (p%)` at most every `every_s` seconds, and once at the end."""

    def __init__(
        self, logger: logging.Logger, label: str, total: int, every_s: float = 2.0
    ) -> None:
        self._logger = logger
        self._label = label
        self._total = max(total, 1)
        self._every_s = every_s
        self._start = time.perf_counter()
        self._last = 0.0

    def update(self, done: int, note: str = "") -> None:
        now = time.perf_counter()
        if done < self._total and now - self._last < self._every_s:
            return
        self._last = now
        pct = 100.0 * done / self._total
        suffix = f" {note}" if note else ""
        self._logger.info(
            "%s: %d/%d (%.0f%%) %.1f s%s",
            self._label, done, self._total, pct, now - self._start, suffix,
        )
