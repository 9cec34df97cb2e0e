"""Small statistics shared by the benchmarks (percentiles over repeated runs)."""

from __future__ import annotations

from collections.abc import Sequence


def pct(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) by linear interpolation; NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
