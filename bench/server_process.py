"""The server as its own process, as deployed, for the benchmarks that talk to it over WebRTC.

`agent_toml(port, agent=..., llm=...)` is the benchmarks' server configuration: agent mode on
127.0.0.1:`port`, warnings only, loopback-only ICE, no greeting, plus the given `[agent]` keys
and, when `llm` is given, an `[llm]` section (likewise `vad`, `asr`, `turn`, `profile`);
with `base` (a profile file such as config/gpu.toml) its tables first, the benchmark's keys
over them (rtc_server.config_toml, which bench/cluster.py's workers use too).
`add_profile_options` and `profile_keys`: GPU mode's command-line options (--config,
--llm-model, --forced-answers, --asr-model) and the `[llm]`/`[asr]` keys they set.
`running_server(config_toml, slow)` writes the TOML, starts `python -m rtc_server --config ...`
(with `slow`, as on the emulated slow machine, `bench/slow_machine.py`),
waits for its "rtc-avatar ... at http://..." line (the models load first) and stops it at the
end; the peer in the benchmark's process restricts its ICE candidates to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bench.slow_machine import SlowMachine
from rtc_server.config_toml import Table, merged_toml

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 900  # the first start assembles and loads every model


def agent_toml(
    port: int, agent: Table | None = None, llm: Table | None = None, vad: Table | None = None,
    asr: Table | None = None, turn: Table | None = None, profile: Table | None = None,
    base: Path | None = None,
) -> str:
    """The server's TOML for a benchmark (see the module docstring)."""
    sections: dict[str, Table] = {
        "server": {"mode": "agent", "port": port, "log_level": "WARNING"},
        "ice": {"loopback_only": True},
        "agent": {"greeting": "", **(agent or {})},
    }
    if llm is not None:
        sections["llm"] = llm
    for section, keys in (("vad", vad), ("asr", asr), ("turn", turn), ("profile", profile)):
        if keys:
            sections[section] = keys
    return merged_toml(sections, base)


def add_profile_options(parser: argparse.ArgumentParser, llm_model_help: str) -> None:
    """GPU mode's options (README "GPU"): a server profile under the benchmark's keys, the
    model, timing-equivalent decoding and the Whisper model; `profile_keys` maps them."""
    parser.add_argument("--config", type=Path, help="a server profile under the benchmark's keys "
                        "(e.g. config/gpu.toml)")
    parser.add_argument("--llm-model", help=llm_model_help)
    parser.add_argument("--forced-answers", help="llm.forced_answers (benchmarks only: random "
                        "weights, timing-equivalent decoding)")
    parser.add_argument("--asr-model", help="asr.model (base, tiny.en or a directory)")


def profile_keys(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str]]:
    """The `[llm]` and `[asr]` keys of `add_profile_options`' options that were given."""
    forced = args.forced_answers and str(Path(args.forced_answers).resolve())  # any cwd
    llm = {"model": args.llm_model, "forced_answers": forced or None}
    asr = {"model": args.asr_model}
    return ({k: v for k, v in llm.items() if v is not None},
            {k: v for k, v in asr.items() if v is not None})


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
