"""Serve an aiohttp app on host:port (0 = any free port) and tell the port actually bound."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def listening(app: web.Application, host: str, port: int) -> AsyncIterator[int]:
    """The app runs while the block runs; yields the bound port. Shuts the app down after."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


def url_for(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"
