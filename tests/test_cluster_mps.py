"""The workers' MPS server (rtc_server/cluster/mps.py) against a stand-in control program
(a shell script recording how it was called): this machine has no GPU. The real daemon ran
on the H200 (bench/RESULTS.md, section gpu)."""

from __future__ import annotations

import functools
import stat
import sys
from pathlib import Path

import pytest

from rtc_server.cluster.local import start_child
from rtc_server.cluster.mps import MpsUnavailable, mps_server

FAKE = """#!/bin/sh
# records each call: its arguments, the pipe directory it was given, what came on stdin
if [ "$1" = "-d" ]; then
  echo "start $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >> {calls}
  exit {start_code}
fi
echo "control $CUDA_MPS_PIPE_DIRECTORY $(cat)" >> {calls}
"""


def fake_control(tmp_path: Path, start_code: int = 0) -> tuple[str, Path]:
    calls = tmp_path / "calls.txt"
    program = tmp_path / "fake-mps-control"
    program.write_text(FAKE.format(calls=calls, start_code=start_code))
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    return str(program), calls


def both_dirs(*paths: str) -> bool:
    return all(Path(p).is_dir() for p in paths)


async def test_daemon_is_private_to_its_directory_and_quits_on_exit(tmp_path: Path) -> None:
    program, calls = fake_control(tmp_path)
    home = tmp_path / "mps"
    async with mps_server(home, program) as env:
        pipe, log = env["CUDA_MPS_PIPE_DIRECTORY"], env["CUDA_MPS_LOG_DIRECTORY"]
        assert both_dirs(pipe, log)
        assert Path(pipe).parent == home and Path(log).parent == home
        assert calls.read_text().splitlines() == [f"start {pipe} {log}"]
    assert calls.read_text().splitlines()[1] == f"control {pipe} quit"


async def test_quit_is_sent_when_the_body_fails(tmp_path: Path) -> None:
    program, calls = fake_control(tmp_path)
    with pytest.raises(RuntimeError, match="worker failed"):
        async with mps_server(tmp_path / "mps", program):
            raise RuntimeError("worker failed")
    assert calls.read_text().splitlines()[-1].endswith(" quit")


async def test_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MpsUnavailable, match="not found"):
        async with mps_server(tmp_path, str(tmp_path / "no-such-program")):
            pass


async def test_a_daemon_that_will_not_start_is_a_clear_error(tmp_path: Path) -> None:
    program, calls = fake_control(tmp_path, start_code=3)
    with pytest.raises(MpsUnavailable, match=r"-d failed \(3\)"):
        async with mps_server(tmp_path / "mps", program):
            pass
    assert len(calls.read_text().splitlines()) == 1  # started once, nothing to quit


async def test_a_child_gets_the_servers_environment(tmp_path: Path) -> None:
    """What `run_cluster(worker_env=...)` hands each worker (through `start_child`)."""
    program, _ = fake_control(tmp_path)
    async with mps_server(tmp_path / "mps", program) as env:
        argv = [sys.executable, "-c",
                "import os; print('ready', os.environ['CUDA_MPS_PIPE_DIRECTORY'], flush=True)"]
        child = await start_child("probe", argv, "ready", tmp_path, env=env)
        try:
            assert child.ready_line == f"ready {env['CUDA_MPS_PIPE_DIRECTORY']}"
        finally:
            await child.stop()


def test_the_cluster_cli_refuses_mps_without_the_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """`python -m rtc_server.cluster --mps` on a machine without NVIDIA's utilities: a clear
    error before any worker starts, not a cluster on time-sliced contexts."""
    from rtc_server.cluster.__main__ import main
    from rtc_server.cluster.local import have

    if not have("redis-server"):
        pytest.skip("redis-server is not installed (make test installs it)")
    monkeypatch.setattr("rtc_server.cluster.__main__.mps_server",
                        functools.partial(mps_server, program="no-such-mps-control"))
    code = main(["--mode", "echo", "--no-turn", "--mps", "--log-dir", str(tmp_path)])
    assert code == 1
    assert "no-such-mps-control not found" in capsys.readouterr().err
    assert not list(tmp_path.glob("worker*.log"))
