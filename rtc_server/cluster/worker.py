"""A worker: the media server of one process, registered in the directory, fed by gateways.

- **Registration**: every `heartbeat_s` it writes its signed record (address, capacity,
  draining) with a TTL and renews the lease of each live session. When Redis is down it
  keeps serving its sessions and retries on the next beat (one log line per outage).
- **Offers come only through a gateway**: `POST /cluster/offer` must carry a token signed with
  the cluster secret naming this worker and the session id the gateway reserved; the public
  `POST /api/offer`, `DELETE /api/sessions/...` and `POST /api/portrait` answer 403
  `gateway_required`. A token is good once (a replay gets 409), for this worker only (403).
- **Sessions end**: the slot and route are released at once (and expire anyway within the TTL
  if Redis missed that).
- **Draining** (SIGTERM, or a signed `POST /cluster/drain`): the record is marked draining, so
  no gateway reserves here; the sessions run to their end (or are closed after
  `drain_timeout_s`); then the worker deregisters and the process exits. SIGINT stops at once
  (sessions are closed, peers see the connection close).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import signal
import socket
import time

from aiohttp import web

from rtc_server.app import Server
from rtc_server.cluster.directory import Directory, WorkerRecord
from rtc_server.cluster.errors import (
    ClusterUnauthorized,
    DirectoryUnavailable,
    Draining,
    GatewayRequired,
    ReservationUsed,
)
from rtc_server.cluster.serving import listening, url_for
from rtc_server.cluster.signing import TOKEN_HEADER, verify_request
from rtc_server.config import Config
from rtc_server.session import Session
from rtc_server.tasks import TaskSet
from signaling.http import Handler, read_body
from signaling.offer import parse_offer

logger = logging.getLogger(__name__)
_PUBLIC_WRITES = ("/api/offer", "/api/portrait", "/api/sessions/")


def default_worker_id(port: int) -> str:
    return f"{socket.gethostname()}-{port}-{secrets.token_hex(2)}"


class ClusterWorker:
    def __init__(self, server: Server, directory: Directory, secret: str) -> None:
        self.server = server
        self.config: Config = server.config
        self._cluster = server.config.cluster
        self._directory = directory
        self._secret = secret
        self.worker_id = ""
        self.url = ""
        self.tasks = TaskSet("cluster-worker")
        self.stopped = asyncio.Event()  # set when the process should exit
        self.draining = False
        self._seq = itertools.count(1)
        self._beat_lock = asyncio.Lock()
        self._changed = asyncio.Event()  # a session ended or a set-up finished
        self._used: dict[str, float] = {}  # session id -> expiry of the token that made it
        self._registered: bool | None = None

    # --- wiring -------------------------------------------------------------------------

    def install(self, app: web.Application) -> None:
        """Add the gateway-only guard, the /cluster routes and the start/stop hooks."""
        app.middlewares.append(self._gateway_only)
        app.router.add_post("/cluster/offer", self._offer)
        app.router.add_delete("/cluster/sessions/{session_id}", self._delete)
        app.router.add_post("/cluster/drain", self._drain_request)
        app.on_shutdown.insert(0, self._on_shutdown)  # before the sessions are closed

        async def close_directory(app: web.Application) -> None:
            await self._directory.close()

        app.on_cleanup.append(close_directory)

    async def start(self, url: str, port: int) -> None:
        """Register (once now, so a ready worker is listed) and start the heartbeat."""
        self.url = url
        self.worker_id = self._cluster.worker_id or default_worker_id(port)
        await self._beat_quietly()
        self.tasks.spawn("heartbeat", self._heartbeat_loop())

    @web.middleware
    async def _gateway_only(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "GET" and request.path.startswith(_PUBLIC_WRITES):
            raise GatewayRequired("this worker takes offers and deletes through the gateway")
        return await handler(request)

    # --- directory ----------------------------------------------------------------------

    async def _beat(self) -> None:
        async with self._beat_lock:  # sequence numbers reach Redis in order
            record = WorkerRecord.signed(
                self._secret, self.worker_id, self.url, self.server.registry.max_sessions,
                self.draining, int(time.time() * 1000), next(self._seq),
            )
            ttl_ms = int(self._cluster.ttl_s * 1000)
            sessions = [s.id for s in self.server.registry]
            await self._directory.heartbeat(record, sessions, ttl_ms=ttl_ms, lease_ms=ttl_ms)

    async def _beat_quietly(self) -> None:
        try:
            await self._beat()
        except DirectoryUnavailable as exc:
            if self._registered is not False:
                logger.warning("registration failed; serving on, retrying", extra={
                    "worker_id": self.worker_id, "error": exc.message})
            self._registered = False
            return
        if self._registered is not True:
            logger.info("registered", extra={"worker_id": self.worker_id, "url": self.url})
        self._registered = True

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._cluster.heartbeat_s)  # a timer, not a condition poll
            await self._beat_quietly()

    async def _release(self, session_id: str) -> None:
        try:
            await self._directory.release(self.worker_id, session_id)
        except DirectoryUnavailable as exc:  # the lease expires by itself within the TTL
            logger.warning("slot release failed", extra={"session_id": session_id,
                                                         "error": exc.message})

    # --- routes -------------------------------------------------------------------------

    def _claims(self, request: web.Request, action: str) -> str:
        claims = verify_request(
            self._secret, request.headers.get(TOKEN_HEADER), action, self.worker_id
        )
        return claims.subject

    async def _offer(self, request: web.Request) -> web.Response:
        claims = verify_request(
            self._secret, request.headers.get(TOKEN_HEADER), "offer", self.worker_id
        )
        session_id = claims.subject
        if not session_id:
            raise ClusterUnauthorized("offer token names no session")
        if self.draining:
            raise Draining(f"worker {self.worker_id} is draining")
        now = time.time()
        self._used = {sid: exp for sid, exp in self._used.items() if exp >= now}
        if session_id in self._used:
            raise ReservationUsed(f"reservation for session {session_id!r} was already used")
        self._used[session_id] = claims.expires
        settings_limit = self.config.server.max_body_bytes
        offer = parse_offer(await read_body(request, settings_limit, ("application/json",)))
        registry = self.server.registry
        try:
            async with registry.reserve(session_id) as reservation:
                session, answer = await self.server.create_session(session_id, offer)
                reservation.commit(session)
        finally:
            self._changed.set()
        self.tasks.spawn(f"watch:{session_id}", self._watch(session))
        await self._beat_quietly()  # turns the gateway's reservation into a session lease
        return web.json_response(
            {"sdp": answer, "type": "answer", "session_id": session_id,
             "worker_id": self.worker_id}
        )

    async def _watch(self, session: Session) -> None:
        await session.closed_event.wait()
        self._changed.set()
        await self._release(session.id)

    async def _delete(self, request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        if self._claims(request, "delete") != session_id:
            raise ClusterUnauthorized("delete token is for another session")
        session = self.server.registry.get(session_id)  # 404 session_not_found
        await session.close()
        return web.json_response({"session_id": session_id, "closed": True})

    async def _drain_request(self, request: web.Request) -> web.Response:
        self._claims(request, "drain")
        self.drain("request")
        return web.json_response(
            {"worker_id": self.worker_id, "draining": True,
             "sessions": len(self.server.registry)},
            status=202,
        )

    # --- draining and shutdown ----------------------------------------------------------

    def drain(self, reason: str) -> None:
        """Take no new sessions, let the current ones end, then stop. Idempotent."""
        if self.draining:
            return
        self.draining = True
        logger.info("draining", extra={"worker_id": self.worker_id, "reason": reason,
                                       "sessions": len(self.server.registry)})
        self.tasks.spawn("drain", self._drain())

    def stop_now(self) -> None:
        self.stopped.set()

    def _busy(self) -> bool:
        registry = self.server.registry
        return len(registry) > 0 or registry.pending > 0

    async def _drain(self) -> None:
        await self._beat_quietly()  # publish draining: gateways stop reserving here
        timeout = self._cluster.drain_timeout_s or None
        try:
            await asyncio.wait_for(self._until_idle(), timeout)
        except TimeoutError:
            logger.warning("drain timeout: closing remaining sessions",
                           extra={"sessions": len(self.server.registry)})
        logger.info("drained", extra={"worker_id": self.worker_id})
        self.stopped.set()

    async def _until_idle(self) -> None:
        while self._busy():
            self._changed.clear()
            await self._changed.wait()

    async def _on_shutdown(self, app: web.Application) -> None:
        await self.tasks.cancel_all(keep=asyncio.current_task())
        sessions = [s.id for s in self.server.registry]
        try:
            await self._directory.deregister(self.worker_id, sessions)
        except DirectoryUnavailable as exc:  # the record expires within its TTL anyway
            logger.warning("deregistration failed", extra={"error": exc.message})


def advertised_url(config: Config, port: int) -> str:
    host = config.cluster.advertise or config.server.host
    if host in ("0.0.0.0", "::", ""):
        raise ValueError("a worker bound to a wildcard address needs --advertise HOST")
    return url_for(host, port)


async def serve_worker(server: Server, directory: Directory, secret: str) -> None:
    """Run the worker until it has drained (SIGTERM) or is stopped (SIGINT)."""
    config = server.config
    worker = ClusterWorker(server, directory, secret)
    app = server.build_app()
    worker.install(app)
    async with listening(app, config.server.host, config.server.port) as port:
        url = advertised_url(config, port)
        await worker.start(url, port)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.drain, "SIGTERM")
        loop.add_signal_handler(signal.SIGINT, worker.stop_now)
        print(f"rtc-avatar worker {worker.worker_id} ({config.server.mode} mode) at {url}/",
              flush=True)
        await worker.stopped.wait()
