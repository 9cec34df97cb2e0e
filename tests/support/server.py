"""Run the real server app in the test's event loop on 127.0.0.1 (an ephemeral port)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp.test_utils import TestServer

from rtc_server.app import Server
from rtc_server.config import Config, IceConfig, MediaConfig, ServerConfig
from rtc_server.engine_set import Engines
from testkit.peer import LoopbackPeer

# Tests about audio, events or signaling need little video: small frames keep the encoder
# and the test peer's decoder from competing with what is being measured on 2 cores.
SMALL_VIDEO = MediaConfig(width=128, height=128, fps=10)


def loopback_config(media: MediaConfig | None = None, **server: Any) -> Config:
    """Echo mode (no models) with loopback-only ICE (tests run in a loopback-only namespace)."""
    server.setdefault("mode", "echo")
    return Config(
        server=dataclasses.replace(ServerConfig(), **server),
        ice=IceConfig(loopback_only=True),
        media=media or MediaConfig(),
    )


@asynccontextmanager
async def running_server(
    config: Config | None = None, engines: Engines | None = None
) -> AsyncIterator[tuple[Server, str]]:
    """The app on an ephemeral 127.0.0.1 port; `engines` are shared (agent mode), not closed."""
    server = Server(config or loopback_config(), engines)
    http = TestServer(server.build_app(), host="127.0.0.1")
    await http.start_server()
    try:
        yield server, str(http.make_url("/")).rstrip("/")
    finally:
        await http.close()


async def frames_keep_coming(peer: LoopbackPeer, within_s: float = 10.0) -> bool:
    """Whether `peer` receives new video frames now (its session is alive): a bound, not a
    rate, so a busy machine's slow first frames pass (the frames arrive in another task)."""
    before = len(peer.received.video)
    for _ in range(int(within_s / 0.1)):
        await asyncio.sleep(0.1)
        if len(peer.received.video) > before + 3:
            return True
    return False
