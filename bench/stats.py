"""What the benchmarks share for their results: percentiles over repeated runs (`pct`) and
the table on stdout with the raw results as JSON beside it (`publish`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def pct(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) by linear interpolation; NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def publish(table: str, results: object, json_path: str | None) -> int:
    """Print `table`; also write `results` to `json_path` when given. The CLI's exit code."""
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=1))
    print(table)
    return 0
