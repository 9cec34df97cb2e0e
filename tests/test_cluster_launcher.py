"""`python -m rtc_server.cluster` with a server profile (`--config`, e.g. config/gpu.toml)
and pinned workers (`--pin-workers`): the GPU deployment of many sessions on one box,
launched as measured (README, GPU)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

from rtc_server.cluster.__main__ import cluster_toml, main, parse_args
from rtc_server.cluster.local import free_port_run, have, share_cores

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "config" / "gpu.toml"


def test_the_profile_goes_under_the_launchers_keys() -> None:
    args = parse_args(["--config", str(PROFILE), "--llm", "own", "--sessions-per-worker", "4"])
    relay = {"urls": ["turn:127.0.0.1:3478?transport=udp"], "secret": "north"}
    config = tomllib.loads(cluster_toml(args, relay, None))
    profile = tomllib.loads(PROFILE.read_text())
    assert config["server"] == {"max_sessions": 4, "mode": "agent"}  # not the profile's 16
    assert config["llm"] == profile["llm"] and config["tts"] == profile["tts"]
    assert config["relay"] == relay and config["ice"] == {"loopback_only": True}
    without = tomllib.loads(cluster_toml(parse_args(["--mode", "echo"]), None, None))
    assert without == {"server": {"mode": "echo", "max_sessions": 4},
                       "ice": {"loopback_only": True}}


def test_a_gpu_profile_without_a_gpu_stops_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("rtc_server.cluster.__main__.cuda_available", lambda: False)
    code = main(["--config", str(PROFILE), "--llm", "own", "--no-turn",
                 "--log-dir", str(tmp_path / "logs")])
    assert code == 2
    err = capsys.readouterr().err
    assert '[llm] device = "cuda"' in err and "[tts] device" in err
    assert not (tmp_path / "logs").exists()  # nothing started, not even redis


@pytest.mark.parametrize(("profile", "args", "expected"), [
    (None, ["--llm", "own"], "not found|No such file"),
    ("[a.b]\nc = 1\n", ["--llm", "own"], "not a table of plain values"),
    ("[llm]\nflavour = 1\n", ["--llm", "own"], r"unknown key\(s\): flavour"),
    ("[llm]\nbatch_streams = 4\n", [], "shared.*batch_streams is for the transformers"),
])
def test_a_bad_profile_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], profile: str | None, args: list[str],
    expected: str,
) -> None:
    path = tmp_path / "profile.toml"
    if profile is not None:
        path.write_text(profile)
    assert main(["--config", str(path), "--no-turn", *args,
                 "--log-dir", str(tmp_path / "logs")]) == 2
    assert re.search(expected, capsys.readouterr().err)
    assert not (tmp_path / "logs").exists()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_children(int(child))]
    return found


def test_a_run_of_free_ports_is_free() -> None:
    """The launcher's gateway and workers take P, P+1, ...: all of them bind."""
    import socket

    port = free_port_run(3)
    with socket.socket() as a, socket.socket() as b, socket.socket() as c:
        for sock, p in ((a, port), (b, port + 1), (c, port + 2)):
            sock.bind(("127.0.0.1", p))
    with pytest.raises(ValueError):
        free_port_run(0)


def _cores(pid: int) -> list[int]:
    return sorted(os.sched_getaffinity(pid))


@pytest.mark.skipif(not have("redis-server"), reason="redis-server is not installed "
                    "(make test installs it)")
def test_pinned_workers_run_on_their_own_cores(tmp_path: Path) -> None:
    """Each worker on its share of the cores (`share_cores`), the launcher's other children
    on the rest; Ctrl-C stops them all."""
    port = free_port_run(3)  # the gateway and its two workers' ports
    launcher = subprocess.Popen(
        [sys.executable, "-m", "rtc_server.cluster", "--mode", "echo", "--no-turn",
         "--workers", "2", "--pin-workers", "--port", str(port), "--log-dir", str(tmp_path)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    watchdog = threading.Timer(300.0, launcher.kill)  # a launcher that never comes up
    watchdog.start()
    try:
        assert launcher.stdout is not None
        lines = []
        for line in launcher.stdout:  # until the cluster is up (or the launcher ends)
            lines.append(line)
            if line.startswith("open"):
                break
        assert any(line.startswith("open") for line in lines), "".join(lines)
        shares, rest = share_cores(sorted(os.sched_getaffinity(0)), 2)
        groups = [sorted(group) for group in shares]
        workers = [pid for pid in _children(launcher.pid)
                   if b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
        assert len(workers) == 2
        assert sorted(_cores(pid) for pid in workers) == sorted(groups)
        assert _cores(launcher.pid) == sorted(rest)
    finally:
        watchdog.cancel()
        launcher.send_signal(signal.SIGINT)
        try:
            assert launcher.wait(timeout=60) == 0  # stopped everything and exited cleanly
        finally:
            if launcher.poll() is None:
                launcher.kill()
