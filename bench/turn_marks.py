"""A turn's `timings` marks as p50/p95 table rows (testkit/marks.py collects them per stage),
for bench/voice_to_voice.py and bench/cluster.py."""

from __future__ import annotations

from collections.abc import Sequence

from bench.stats import pct
from testkit.marks import Marks, stage_values

Row = tuple[str, str, str]  # metric, p50, p95


def mark_rows(marks: Sequence[Marks]) -> list[Row]:
    """End of turn, the hearing marks sent, `voice_end` and every stage (NaN where none)."""
    return [(metric, f"{pct(values, 0.5):.0f}", f"{pct(values, 0.95):.0f}")
            for metric, values in stage_values(marks)]
