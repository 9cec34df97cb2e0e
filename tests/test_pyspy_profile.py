"""testkit/pyspy.py: a py-spy raw profile read back per thread and per function."""

from __future__ import annotations

import pytest

from testkit.pyspy import cores, read_raw

RAW = """\
thread (0x7f01): rtc-render_0;Thread.run (threading.py:1010);_worker (thread.py:92);warp (w.py:4) 30
thread (0x7f02): rtc-render_1;Thread.run (threading.py:1010);_worker (thread.py:92) 10
thread (0x7f03): MainThread;main (__main__.py:115);run (app.py:9);run (app.py:9) 20

"""


def test_threads_merge_a_pool_and_functions_count_once_per_stack() -> None:
    profile = read_raw(RAW.splitlines())
    assert profile.samples == 60
    assert profile.threads == {"rtc-render": 40, "MainThread": 20}
    assert profile.functions["_worker"] == 40
    assert profile.functions["warp"] == 30
    assert profile.functions["run"] == 20  # recursion: once per stack, not twice
    assert cores(profile.threads["rtc-render"], 50.0, 0.5) == pytest.approx(1.6)


def test_a_line_without_a_count_is_refused() -> None:
    with pytest.raises(ValueError, match="not a py-spy raw line"):
        read_raw(["thread (0x1): MainThread;main (x.py:1)"])
