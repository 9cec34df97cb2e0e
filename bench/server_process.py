"""The server as its own process, as deployed, for the benchmarks that talk to it over WebRTC.

`agent_toml(port, agent=..., llm=...)` is the benchmarks' server configuration: agent mode on
127.0.0.1:`port`, warnings only, loopback-only ICE, no greeting, plus the given `[agent]` keys
and, when `llm` is given, an `[llm]` section (likewise `vad`, `asr`, `turn`, `profile`);
with `base` (a profile file such as config/gpu.toml) its tables first, the benchmark's keys
over them.
`running_server(config_toml, slow)` writes the TOML, starts `python -m rtc_server --config ...`
(with `slow`, as on the emulated slow machine, `bench/slow_machine.py`),
waits for its "rtc-avatar ... at http://..." line (the models load first) and stops it at the
end; the peer in the benchmark's process restricts its ICE candidates to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import signal
import sys
import tempfile
import tomllib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from bench.slow_machine import SlowMachine

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 900  # the first start assembles and loads every model
Table = Mapping[str, str | int | float | bool]


def _lines(section: str, keys: Table) -> list[str]:
    def value(v: str | int | float | bool) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)

    return [f"[{section}]", *(f"{key} = {value(v)}" for key, v in keys.items())]


def agent_toml(
    port: int, agent: Table | None = None, llm: Table | None = None, vad: Table | None = None,
    asr: Table | None = None, turn: Table | None = None, profile: Table | None = None,
    base: Path | None = None,
) -> str:
    """The server's TOML for a benchmark (see the module docstring)."""
    tables: dict[str, dict[str, str | int | float | bool]] = {}
    if base is not None:
        for section, keys in tomllib.loads(base.read_text()).items():
            if not isinstance(keys, dict) or any(isinstance(v, (dict, list)) for v in
                                                 keys.values()):
                raise ValueError(f"{base}: [{section}] is not a table of plain values")
            tables[section] = dict(keys)

    def add(section: str, keys: Table | None) -> None:
        tables.setdefault(section, {}).update(keys or {})

    add("server", {"mode": "agent", "port": port, "log_level": "WARNING"})
    add("ice", {"loopback_only": True})
    add("agent", {"greeting": "", **(agent or {})})
    if llm is not None:
        add("llm", llm)
    for section, keys in (("vad", vad), ("asr", asr), ("turn", turn), ("profile", profile)):
        if keys:
            add(section, keys)
    lines = [line for section, keys in tables.items() for line in _lines(section, keys)]
    return "\n".join(lines) + "\n"


def _end_with_parent() -> None:
    """In the child before exec: the server gets SIGTERM when the benchmark's process ends,
    however it ends (a kill skips the `finally` below; an orphaned server kept its port and
    a core busy under the next benchmark). Linux's PR_SET_PDEATHSIG; elsewhere nothing."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


@asynccontextmanager
async def running_server(
    config_toml: str, slow: SlowMachine | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The server on `config_toml`; with `slow`, as on the emulated slow machine."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as config_file:
        config_file.write(config_toml)
        config_file.flush()
        argv = [sys.executable, "-m", "rtc_server", "--config", config_file.name]
        env = None
        if slow is not None:
            slow.prepare()
            argv, env = slow.wrap(argv), slow.env()
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=REPO, stdout=asyncio.subprocess.PIPE, env=env,
            preexec_fn=_end_with_parent,  # noqa: PLW1509 - only prctl, no locks or threads
        )
        try:
            assert process.stdout is not None
            line = await asyncio.wait_for(process.stdout.readline(), STARTUP_TIMEOUT_S)
            if not line.startswith(b"rtc-avatar"):
                raise RuntimeError(f"server did not start: {line!r}")
            yield process
        finally:
            if process.returncode is None:
                process.terminate()
                await process.wait()
