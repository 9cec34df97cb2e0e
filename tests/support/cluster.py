"""A real cluster on loopback for tests: redis-server, echo-mode workers and a gateway, each
its own process (rtc_server.cluster.local), with small video and short timers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.typing import EncodableT, FieldT

from rtc_server.cluster.local import Child, have, run_cluster
from rtc_server.cluster.signing import TOKEN_HEADER, request_token


def redis_hash(fields: dict[str, str]) -> dict[FieldT, EncodableT]:
    """A record's fields as redis-py types `hset(mapping=...)` (its keys are not only str)."""
    return {key: value for key, value in fields.items()}


SECRET = "test-cluster-secret"
HEARTBEAT_S, TTL_S = 0.5, 2.0
CONFIG = """
[server]
mode = "echo"
max_sessions = {max_sessions}
connect_timeout_s = 20
log_level = "INFO"
[ice]
loopback_only = true
[media]
width = 128
height = 128
fps = 10
[cluster]
heartbeat_s = {heartbeat}
ttl_s = {ttl}
reservation_ttl_s = 10
forward_timeout_s = 10
"""


def need(*programs: str) -> None:
    missing = [p for p in programs if not have(p)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (make test installs redis-server and "
                    "coturn from Debian as root)")


async def eventually(
    check: Callable[[], Awaitable[bool]], within_s: float, what: str, every_s: float = 0.1
) -> None:
    """Wait until `check()` holds for a state owned by another process (nothing to await)."""
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within_s} s: {what}")
        await asyncio.sleep(every_s)


@dataclass
class Worker:
    child: Child
    url: str

    @property
    def worker_id(self) -> str:
        return self.child.ready_line.split()[2]


@dataclass
class LocalCluster:
    log_dir: Path
    config_path: Path
    redis: Child
    redis_url: str
    gateway: Child
    url: str
    workers: list[Worker] = field(default_factory=list)
    http: aiohttp.ClientSession | None = None

    async def get(self, url: str) -> tuple[int, Any]:
        assert self.http is not None
        async with self.http.get(url) as resp:
            return resp.status, await resp.json()

    async def health(self) -> dict[str, Any]:
        status, body = await self.get(self.url + "/healthz")
        assert status == 200, body
        return dict(body)

    async def worker_sessions(self) -> list[int]:
        return [(await self.get(w.url + "/healthz"))[1]["sessions"] for w in self.workers]

    async def signed(
        self, method: str, worker: Worker, path: str, action: str, subject: str,
        body: bytes | None = None, worker_id: str | None = None,
    ) -> tuple[int, Any]:
        """A gateway-style request to a worker (the test knows the cluster secret)."""
        assert self.http is not None
        token = request_token(SECRET, action, worker_id or worker.worker_id, subject, 10.0)
        headers = {TOKEN_HEADER: token, "Content-Type": "application/json"}
        async with self.http.request(method, worker.url + path, data=body,
                                     headers=headers) as resp:
            return resp.status, await resp.json()


@asynccontextmanager
async def local_cluster(
    log_dir: Path, workers: int = 2, max_sessions: int = 2, extra_toml: str = ""
) -> AsyncIterator[LocalCluster]:
    """Redis, `workers` echo workers and a gateway, all stopped at the end; `extra_toml` is
    appended to their config file (e.g. a [relay] section)."""
    need("redis-server")
    config_path = log_dir / "cluster.toml"
    config_path.write_text(CONFIG.format(max_sessions=max_sessions, heartbeat=HEARTBEAT_S,
                                         ttl=TTL_S) + extra_toml)
    async with (
        run_cluster(log_dir, config_path, SECRET, workers=workers, worker_timeout_s=120) as run,
        aiohttp.ClientSession() as http,
    ):
        yield LocalCluster(log_dir, config_path, run.redis, run.redis_url, run.gateway, run.url,
                           [Worker(c, u) for c, u in run.workers], http)
