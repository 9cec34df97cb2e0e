"""The gateway: one HTTP entry for a cluster of workers; it never touches media.

Routes (same shapes and error format as the single process, see signaling.http):
- `GET /`, `/static/*`, `GET /api/config`: the page, with fresh time-limited TURN credentials;
- `POST /api/offer`: validates the offer (400 before any slot is booked), reserves a slot on
  the worker with the most free slots (one atomic Redis script, see directory), forwards the
  offer with a token signed for that worker and session, and returns the worker's answer.
  Media then flows between the peer and that worker. A worker that cannot be reached, or
  answers 503 (full, draining), is released and the next one tried (`forward_attempts`);
  503 `at_capacity` when every worker is full, 503 `no_workers` when none is registered;
- `DELETE /api/sessions/{id}`: looked up in the directory, forwarded to the session's worker;
- `GET /healthz`: live and draining workers, slots, used and free ones;
- `GET /metrics`: Prometheus text of the same, plus offers by result and their latency;
- `POST /api/portrait`: 501 (uploads live in one worker's memory; not offered here).
Redis unreachable: 503 `directory_unavailable` on every route that needs it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import signal
import time
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from rtc_server.cluster.directory import Directory, Snapshot, WorkerRecord
from rtc_server.cluster.errors import (
    DirectoryUnavailable,
    NotInCluster,
    NoWorkers,
    WorkerUnreachable,
)
from rtc_server.cluster.serving import listening, url_for
from rtc_server.cluster.signing import TOKEN_HEADER, request_token
from rtc_server.config import Config
from rtc_server.page import signaling_settings
from signaling.cors import cors_middleware
from signaling.errors import AtCapacity, SessionNotFound, SignalingError
from signaling.http import (
    SETTINGS_KEY,
    add_page_routes,
    bearer_auth,
    json_errors,
    read_body,
)
from signaling.offer import parse_offer
from web_client import STATIC_DIR

logger = logging.getLogger(__name__)


class Relayed(SignalingError):
    """A worker's own error answer, passed on with its status and code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def relayed(status: int, data: Any) -> Relayed:
    error = data.get("error", {}) if isinstance(data, dict) else {}
    return Relayed(status, str(error.get("code", "worker_error")),
                   str(error.get("message", f"worker answered {status}")))


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.offers = Counter("rtc_gateway_offers", "Offers by result code", ["result"],
                              registry=self.registry)
        self.offer_seconds = Histogram(
            "rtc_gateway_offer_seconds", "Offer request to answer, through the gateway",
            buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 15), registry=self.registry,
        )
        self.directory_up = Gauge("rtc_cluster_directory_up", "1 when Redis answered",
                                  registry=self.registry)
        self.workers = Gauge("rtc_cluster_workers", "Workers in the directory", ["state"],
                             registry=self.registry)
        self.slots = Gauge("rtc_cluster_slots", "Session slots of live workers", ["state"],
                           registry=self.registry)
        self.refused = Gauge("rtc_cluster_records_refused",
                             "Worker records refused at the last read (forged, stale, ...)",
                             registry=self.registry)

    def update(self, snapshot: Snapshot | None) -> None:
        self.directory_up.set(0 if snapshot is None else 1)
        if snapshot is None:
            return
        totals = snapshot.totals()
        self.workers.labels(state="live").set(totals["workers"])
        self.workers.labels(state="draining").set(totals["draining"])
        for state in ("slots", "used", "free"):
            self.slots.labels(state="capacity" if state == "slots" else state).set(totals[state])
        self.refused.set(len(snapshot.rejected))


class Gateway:
    def __init__(self, config: Config, directory: Directory, secret: str) -> None:
        self.config = config
        self._cluster = config.cluster
        self._directory = directory
        self._secret = secret
        self.metrics = GatewayMetrics()
        self._http: aiohttp.ClientSession | None = None
        # Workers that did not answer, with the record sequence number they had then: skipped
        # until they heartbeat again (a dead one never does, and leaves within its TTL).
        self._unreachable: dict[str, int] = {}
        # The last verified view of the directory, reused for offers for a quarter of a
        # heartbeat: it only names candidates (their URL and capacity, verified); the
        # reservation script counts their slots live, so a reused view cannot overbook. It
        # saves two of the three Redis round trips of an offer.
        self._view: tuple[float, Snapshot] | None = None
        self._view_s = self._cluster.heartbeat_s / 4

    @property
    def _ttl_ms(self) -> int:
        return int(self._cluster.ttl_s * 1000)

    def build_app(self) -> web.Application:
        settings = signaling_settings(self.config, portrait_upload=False)
        app = web.Application(middlewares=[cors_middleware(settings.cors_origins), json_errors,
                                           bearer_auth],
                              client_max_size=settings.max_body_bytes)
        app[SETTINGS_KEY] = settings
        add_page_routes(app, STATIC_DIR)
        app.router.add_post("/api/offer", self.post_offer)
        app.router.add_delete("/api/sessions/{session_id}", self.delete_session)
        app.router.add_post("/api/portrait", self.post_portrait)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/metrics", self.metrics_text)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, app: web.Application) -> None:
        timeout = aiohttp.ClientTimeout(
            total=self._cluster.forward_timeout_s, sock_connect=min(2.0, self._cluster.ttl_s)
        )
        self._http = aiohttp.ClientSession(timeout=timeout)

    async def _close(self, app: web.Application) -> None:
        if self._http is not None:
            await self._http.close()
        await self._directory.close()

    async def _call(
        self, method: str, url: str, token: str, body: bytes | None = None
    ) -> tuple[int, Any]:
        """One request to a worker; WorkerUnreachable when it does not answer with JSON."""
        assert self._http is not None, "gateway app not started"
        headers = {TOKEN_HEADER: token, "Content-Type": "application/json"}
        try:
            async with self._http.request(method, url, data=body, headers=headers) as resp:
                return resp.status, await resp.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise WorkerUnreachable(f"worker at {url} did not answer: {exc!r}") from exc

    # --- offers -------------------------------------------------------------------------

    async def post_offer(self, request: web.Request) -> web.Response:
        started, result = time.perf_counter(), "internal_error"
        try:
            body = await read_body(request, self.config.server.max_body_bytes,
                                   ("application/json",))
            parse_offer(body)  # refuse a bad offer before booking a slot
            answer = await self._place(body)
            result = "ok"
            return web.json_response(answer)
        except SignalingError as exc:
            result = exc.code
            raise
        finally:
            self.metrics.offers.labels(result=result).inc()
            if result == "ok":
                self.metrics.offer_seconds.observe(time.perf_counter() - started)

    async def _candidates_view(self, fresh: bool) -> tuple[Snapshot, bool]:
        """The directory view for placing an offer, and whether it was read just now."""
        now = time.monotonic()
        if not fresh and self._view is not None and now - self._view[0] < self._view_s:
            return self._view[1], False
        snapshot = await self._directory.snapshot(self._ttl_ms)
        self._view = (now, snapshot)
        return snapshot, True

    async def _place(self, body: bytes) -> dict[str, Any]:
        tried: set[str] = set()
        last: SignalingError | None = None
        hold_ms = int(self._cluster.reservation_ttl_s * 1000)
        attempts, fresh = 0, False
        while attempts < self._cluster.forward_attempts:
            snapshot, fresh = await self._candidates_view(fresh)
            answering = [w.record for w in snapshot.live
                         if self._unreachable.get(w.record.worker_id) != w.record.seq]
            candidates = [r for r in answering if r.worker_id not in tried]
            random.shuffle(candidates)  # equal free slots: spread, not always the first
            session_id = secrets.token_urlsafe(12)
            placed = await self._directory.reserve(session_id, candidates, hold_ms)
            if placed is None and not fresh:
                fresh = True  # the reused view may be out of date: read again, then decide
                continue
            if placed is None:
                if not snapshot.live and last is None:
                    draining = len(snapshot.workers)
                    raise NoWorkers(f"no live worker is registered ({draining} draining)")
                if not answering and last is None:
                    raise WorkerUnreachable("no registered worker answers (they may have died)")
                break
            attempts += 1
            worker = placed[0]
            tried.add(worker.worker_id)
            try:
                status, data = await self._forward_offer(worker, session_id, body, hold_ms)
            except WorkerUnreachable as exc:
                logger.warning("worker unreachable; trying another", extra={
                    "worker_id": worker.worker_id, "error": exc.message})
                await self._directory.release(worker.worker_id, session_id)
                self._unreachable = {
                    w.record.worker_id: seq for w in snapshot.workers
                    if (seq := self._unreachable.get(w.record.worker_id)) is not None
                }  # forget workers that left the directory
                self._unreachable[worker.worker_id] = worker.seq
                last = exc
                continue
            except BaseException:
                await self._directory.release(worker.worker_id, session_id)
                raise
            if status == 200:
                return dict(data)
            await self._directory.release(worker.worker_id, session_id)
            last = relayed(status, data)
            if status != 503:  # the offer itself was refused: another worker would too
                raise last
        if last is not None and not isinstance(last, Relayed):
            raise last
        raise AtCapacity("every worker is at capacity")

    async def _forward_offer(
        self, worker: WorkerRecord, session_id: str, body: bytes, hold_ms: int
    ) -> tuple[int, Any]:
        token = request_token(self._secret, "offer", worker.worker_id, session_id,
                              hold_ms / 1000)
        return await self._call("POST", f"{worker.url}/cluster/offer", token, body)

    # --- other routes -------------------------------------------------------------------

    async def delete_session(self, request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        worker_id = await self._directory.locate(session_id)
        if worker_id is None:
            raise SessionNotFound(f"no session {session_id!r}")
        snapshot = await self._directory.snapshot(self._ttl_ms)
        worker = next((w.record for w in snapshot.workers if w.record.worker_id == worker_id),
                      None)
        if worker is None:
            raise SessionNotFound(f"no session {session_id!r} (its worker is gone)")
        token = request_token(self._secret, "delete", worker_id, session_id, 30.0)
        status, data = await self._call(
            "DELETE", f"{worker.url}/cluster/sessions/{session_id}", token
        )
        if status != 200:
            raise relayed(status, data)
        return web.json_response(data)

    async def post_portrait(self, request: web.Request) -> web.Response:
        raise NotInCluster("portrait upload is not available through the cluster gateway")

    async def healthz(self, request: web.Request) -> web.Response:
        totals = (await self._directory.snapshot(self._ttl_ms)).totals()
        status = "ok" if totals["free"] else ("full" if totals["workers"] else "no_workers")
        return web.json_response({"status": status, **totals})

    async def metrics_text(self, request: web.Request) -> web.Response:
        try:
            snapshot: Snapshot | None = await self._directory.snapshot(self._ttl_ms)
        except DirectoryUnavailable:
            snapshot = None
        self.metrics.update(snapshot)
        response = web.Response(body=generate_latest(self.metrics.registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response


async def serve_gateway(config: Config, directory: Directory, secret: str) -> None:
    """Run the gateway until SIGTERM or SIGINT (it holds no state of its own to drain)."""
    stop = asyncio.Event()
    app = Gateway(config, directory, secret).build_app()
    async with listening(app, config.server.host, config.server.port) as port:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"rtc-avatar gateway at {url_for(config.server.host, port)}/", flush=True)
        await stop.wait()
