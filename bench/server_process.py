"""The server as its own process, as deployed, for the benchmarks that talk to it over WebRTC.

`running_server(config_toml)` writes the TOML, starts `python -m rtc_server --config ...`,
waits for its "rtc-avatar ... at http://..." line (the models load first) and stops it at
the end; the peer in the benchmark's process restricts its ICE candidates to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 900  # the first start assembles and loads every model


@asynccontextmanager
async def running_server(config_toml: str) -> AsyncIterator[asyncio.subprocess.Process]:
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as config_file:
        config_file.write(config_toml)
        config_file.flush()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "rtc_server", "--config", config_file.name,
            cwd=REPO, stdout=asyncio.subprocess.PIPE,
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
