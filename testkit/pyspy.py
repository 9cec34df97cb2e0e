"""A py-spy `record -f raw --threads` profile read back: the CPU each thread and each
function took, in cores (samples / rate / duration).

py-spy counts a thread active while the kernel has it runnable, so on a saturated core the
threads' sum can pass the cores the process may use: that excess is time spent waiting for
the core (bench/RESULTS.md, gpu, 2026-12-03)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

_THREAD = re.compile(r"^thread \(\w+\): (?P<name>.*?)(?:_\d+)?$")
_WHERE = re.compile(r" \([^()]*\)$")  # "(file.py:12)" after a function's name


@dataclass
class Profile:
    samples: int = 0
    threads: Counter[str] = field(default_factory=Counter)  # by name, numbered pools merged
    functions: Counter[str] = field(default_factory=Counter)  # inclusive: once per stack


def cores(samples: int, rate_hz: float, seconds: float) -> float:
    """`samples` of a profile taken at `rate_hz` for `seconds`, as cores kept busy."""
    return samples / (rate_hz * seconds)


def read_raw(lines: Iterable[str]) -> Profile:
    """Collapsed stacks, one per line ("frame;frame;... count"), the thread first."""
    profile = Profile()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            raise ValueError(f"not a py-spy raw line: {line[:80]!r}")
        count = int(count_text)
        frames = stack.split(";")
        thread = _THREAD.match(frames[0])
        if thread is not None:
            profile.threads[thread["name"]] += count
            frames = frames[1:]
        else:
            profile.threads["?"] += count
        profile.samples += count
        for name in {_WHERE.sub("", f) for f in frames}:
            profile.functions[name] += count
    return profile
