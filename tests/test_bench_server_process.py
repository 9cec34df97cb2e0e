"""The benchmarks' server process ends with the benchmark, however the benchmark ends."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_PARENT = """
import os, subprocess, sys
sys.path.insert(0, {repo!r})
from bench.server_process import _end_with_parent
child = subprocess.Popen(["sleep", "60"], preexec_fn=_end_with_parent)
print(child.pid, flush=True)
os._exit(0)  # as a kill would: no finally, no cleanup
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_server_gets_sigterm_when_the_benchmark_dies() -> None:
    out = subprocess.run([sys.executable, "-c", _PARENT.format(repo=str(REPO))],
                         capture_output=True, text=True, check=True).stdout
    pid = int(out.strip())
    deadline = time.monotonic() + 30  # the signal is immediate; the bound only ends a failure
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)
