"""HTTP routes: offer/answer, session delete, health, metrics, page config, static client.

`/api/offer` speaks our offer body and Pipecat's SmallWebRTC one, a superset
(`signaling.smallwebrtc`): the answer names the session as `session_id` and as `pc_id`, an
offer naming a live `pc_id` renegotiates it (on a new peer connection with `restart_pc`),
and `PATCH /api/offer` trickles ICE candidates. `POST /start` and `/sessions/{id}/api/offer`
are the same for clients that start a session first (the prebuilt client); there a `pc_id`
that is not the path's session is not found.

Every error leaves as JSON `{"error": {"code": ..., "message": ...}}` with its status, and
never affects other sessions: a failing request only releases its own reservation. Signaling's
own errors (`signaling.errors`) carry their status and code; the errors of what it calls (the
session factory, the portrait sink) are domain errors that the app maps to one of them with
`create_app(errors=...)`, so the layers below never name an HTTP status.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from signaling.cors import cors_middleware
from signaling.errors import (
    AtCapacity,
    PayloadTooLarge,
    SessionNotFound,
    SignalingError,
    Unauthorized,
    UnsupportedMediaType,
)
from signaling.offer import Offer
from signaling.registry import PeerSession, SessionRegistry
from signaling.smallwebrtc import (
    IceCandidate,
    PeerOffer,
    StartTickets,
    parse_patch,
    parse_peer_offer,
    parse_start,
)

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Domain error class -> the signaling error it is answered with (its status, code).
ErrorTable = Mapping[type[Exception], type[SignalingError]]


class SessionFactory(Protocol):
    async def __call__(self, session_id: str, offer: Offer) -> tuple[PeerSession, str]:
        """Create a session for `offer`; return it and the answer SDP. Raises a domain error
        from the app's error table for an offer it cannot use (answered as InvalidOffer)."""
        ...


class PeerConnections(Protocol):
    """The live connections, by `pc_id` (the session id). Each raises SessionNotFound for an
    id that names no live session, and a domain error from the app's table for an offer or a
    candidate the peer connection cannot use."""

    async def renegotiate(self, pc_id: str, offer: Offer, *, restart: bool) -> str:
        """Answer a new offer on a live connection (a new peer connection with `restart`)."""
        ...

    async def add_ice_candidates(self, pc_id: str, candidates: Sequence[IceCandidate]) -> None:
        ...


class PortraitSink(Protocol):
    async def add_portrait(self, data: bytes) -> str:
        """Check an uploaded portrait and keep it; return its id. Raises a domain error from
        the app's error table for an unusable image (answered as InvalidPortrait)."""
        ...


class MetricsSource(Protocol):
    def render(self) -> tuple[bytes, str]:
        """Prometheus exposition body and its content type."""
        ...


@dataclass(frozen=True)
class SignalingSettings:
    token: str | None
    max_body_bytes: int  # JSON bodies (offers)
    page_config: dict[str, Any]  # handed to the page by GET /api/config
    max_portrait_bytes: int = 10 * 1024 * 1024
    # Per-request additions to page_config (fresh time-limited TURN credentials).
    dynamic_config: Callable[[], dict[str, Any]] | None = None
    # Origins of pages served elsewhere that may call the API (signaling.cors).
    cors_origins: tuple[str, ...] = ()
    # More static folders to serve: (URL prefix, folder), e.g. a prebuilt client.
    extra_static: tuple[tuple[str, Path], ...] = ()
    # How long a `POST /start` session id waits for its offer.
    start_ttl_s: float = 60.0


REGISTRY_KEY = web.AppKey("registry", SessionRegistry)
FACTORY_KEY = web.AppKey("session_factory", SessionFactory)
PEERS_KEY = web.AppKey("peers", PeerConnections)
TICKETS_KEY = web.AppKey("start_tickets", StartTickets)
METRICS_KEY = web.AppKey("metrics", MetricsSource)
PORTRAITS_KEY = web.AppKey("portraits", PortraitSink)
IMAGE_TYPES = ("image/jpeg", "image/png", "image/webp")
SETTINGS_KEY = web.AppKey("signaling_settings", SignalingSettings)
ERRORS_KEY: web.AppKey[ErrorTable] = web.AppKey("domain_errors")


def _error_response(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def _mapped(app: web.Application, exc: Exception) -> type[SignalingError] | None:
    """The signaling error the app's table gives `exc` (or a base class of it), if any."""
    table = app.get(ERRORS_KEY, {})
    return next((table[c] for c in type(exc).__mro__ if c in table), None)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except SignalingError as exc:
        return _error_response(exc.status, exc.code, exc.message)
    except web.HTTPRequestEntityTooLarge:
        return _error_response(413, PayloadTooLarge.code, "request body too large")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = exc.reason.lower().replace(" ", "_")
        return _error_response(exc.status, code, exc.text or exc.reason)
    except Exception as exc:  # request boundary: one bad request must not look like a crash
        mapped = _mapped(request.app, exc)
        if mapped is not None:
            return _error_response(mapped.status, mapped.code, str(exc))
        logger.exception("unhandled error", extra={"path": request.path})
        return _error_response(500, "internal_error", "internal server error")


# What the bearer token guards: the API, and the SmallWebRTC routes of clients that start a
# session first (`POST /start`, `/sessions/{id}/api/offer`).
PROTECTED_PREFIXES = ("/api/", "/start", "/sessions/")


@web.middleware
async def bearer_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    token = request.app[SETTINGS_KEY].token
    if token and request.path.startswith(PROTECTED_PREFIXES):
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
            raise Unauthorized("missing or invalid bearer token")
    return await handler(request)


async def read_body(request: web.Request, limit: int, types: tuple[str, ...]) -> bytes:
    """The body, refused early when it is of the wrong type or grows over `limit` bytes
    (checked while reading, so a chunked upload without Content-Length is cut off too)."""
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"request body over {limit} bytes")
    if request.content_type not in types:
        raise UnsupportedMediaType(
            f"expected Content-Type {' or '.join(types)}, got {request.content_type or 'none'}"
        )
    parts, size = [], 0
    while chunk := await request.content.read(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body over {limit} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def _new_session(request: web.Request, peer: PeerOffer, session_id: str | None = None
                       ) -> web.Response:
    registry = request.app[REGISTRY_KEY]
    async with registry.reserve(session_id) as reservation:
        session, answer = await request.app[FACTORY_KEY](reservation.session_id, peer.offer)
        reservation.commit(session)
    return web.json_response(
        {"sdp": answer, "type": "answer", "session_id": session.id, "pc_id": session.id}
    )


async def _renegotiate(request: web.Request, peer: PeerOffer, pc_id: str) -> web.Response:
    answer = await request.app[PEERS_KEY].renegotiate(pc_id, peer.offer, restart=peer.restart)
    return web.json_response(
        {"sdp": answer, "type": "answer", "session_id": pc_id, "pc_id": pc_id}
    )


async def _body(request: web.Request) -> bytes:
    return await read_body(request, request.app[SETTINGS_KEY].max_body_bytes,
                           ("application/json",))


async def post_offer(request: web.Request) -> web.Response:
    """A new session, or with `pc_id` a new offer for a live one (SmallWebRTC)."""
    peer = parse_peer_offer(await _body(request))
    if peer.pc_id is None:
        return await _new_session(request, peer)
    return await _renegotiate(request, peer, peer.pc_id)


async def patch_offer(request: web.Request) -> web.Response:
    """Trickled ICE candidates for a live connection (SmallWebRTC)."""
    patch = parse_patch(await _body(request))
    await request.app[PEERS_KEY].add_ice_candidates(patch.pc_id, patch.candidates)
    return web.json_response({"status": "success", "pc_id": patch.pc_id})


async def post_start(request: web.Request) -> web.Response:
    """A session id for `/sessions/{id}/api/offer`, and the ICE servers to use with it."""
    settings = request.app[SETTINGS_KEY]
    body = await read_body(request, settings.max_body_bytes, ("application/json",))
    data = parse_start(body)
    registry = request.app[REGISTRY_KEY]
    if len(registry) + registry.pending >= registry.max_sessions:
        raise AtCapacity(f"server is at capacity ({registry.max_sessions} sessions)")
    ticket = request.app[TICKETS_KEY].issue(data)
    extra = settings.dynamic_config() if settings.dynamic_config else {}
    ice = extra.get("ice_servers", settings.page_config.get("ice_servers", []))
    return web.json_response({"sessionId": ticket, "iceConfig": {"iceServers": ice}})


async def post_session_offer(request: web.Request) -> web.Response:
    """`POST /sessions/{id}/api/offer`: the first offer of a `/start` session (its ticket is
    used up), or a new offer for it; a `pc_id` of another session is not found here."""
    session_id = request.match_info["session_id"]
    body = await _body(request)
    tickets = request.app[TICKETS_KEY]
    if tickets.holds(session_id):
        peer = parse_peer_offer(body, tickets.take(session_id))
        if peer.pc_id not in (None, session_id):
            raise SessionNotFound(f"no session {peer.pc_id!r} under /sessions/{session_id}")
        return await _new_session(request, peer, session_id)
    peer = parse_peer_offer(body)
    if peer.pc_id != session_id:
        raise SessionNotFound(
            f"no session {peer.pc_id or session_id!r} under /sessions/{session_id}")
    return await _renegotiate(request, peer, session_id)


async def patch_session_offer(request: web.Request) -> web.Response:
    patch = parse_patch(await _body(request))
    session_id = request.match_info["session_id"]
    if patch.pc_id != session_id:
        raise SessionNotFound(f"no session {patch.pc_id!r} under /sessions/{session_id}")
    await request.app[PEERS_KEY].add_ice_candidates(patch.pc_id, patch.candidates)
    return web.json_response({"status": "success", "pc_id": patch.pc_id})


async def post_portrait(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS_KEY]
    data = await read_body(request, settings.max_portrait_bytes, IMAGE_TYPES)
    portrait_id = await request.app[PORTRAITS_KEY].add_portrait(data)
    return web.json_response({"portrait_id": portrait_id})


async def delete_session(request: web.Request) -> web.Response:
    session = request.app[REGISTRY_KEY].get(request.match_info["session_id"])
    await session.close()
    return web.json_response({"session_id": session.id, "closed": True})


async def get_config(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS_KEY]
    extra = settings.dynamic_config() if settings.dynamic_config else {}
    return web.json_response({**settings.page_config, **extra})


async def healthz(request: web.Request) -> web.Response:
    registry = request.app[REGISTRY_KEY]
    return web.json_response(
        {"status": "ok", "sessions": len(registry), "max_sessions": registry.max_sessions}
    )


async def metrics(request: web.Request) -> web.Response:
    body, content_type = request.app[METRICS_KEY].render()
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response


def _index(folder: Path) -> Handler:
    async def page(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(folder / "index.html")

    return page


def add_page_routes(app: web.Application, static_dir: Path) -> None:
    """Serve the static web client and its page config (`GET /api/config`)."""
    app.router.add_get("/", _index(static_dir))
    app.router.add_static("/static/", static_dir, show_index=False)
    app.router.add_get("/api/config", get_config)
    for prefix, folder in app[SETTINGS_KEY].extra_static:
        app.router.add_get(prefix, _index(folder))
        app.router.add_static(prefix, folder, show_index=False)


def add_routes(app: web.Application, static_dir: Path) -> None:
    """Register the signaling routes and the static web client on `app`."""
    add_page_routes(app, static_dir)
    app.router.add_post("/api/offer", post_offer)
    app.router.add_patch("/api/offer", patch_offer)
    app.router.add_post("/start", post_start)
    app.router.add_post("/sessions/{session_id}/api/offer", post_session_offer)
    app.router.add_patch("/sessions/{session_id}/api/offer", patch_session_offer)
    app.router.add_post("/api/portrait", post_portrait)
    app.router.add_delete("/api/sessions/{session_id}", delete_session)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)


def create_app(
    *,
    registry: SessionRegistry,
    factory: SessionFactory,
    peers: PeerConnections,
    portraits: PortraitSink,
    metrics_source: MetricsSource,
    settings: SignalingSettings,
    static_dir: Path,
    errors: ErrorTable | None = None,
) -> web.Application:
    # client_max_size makes aiohttp itself refuse larger bodies (413) before buffering them;
    # each route then applies its own, smaller limit while reading.
    app = web.Application(
        middlewares=[cors_middleware(settings.cors_origins), json_errors, bearer_auth],
        client_max_size=max(settings.max_body_bytes, settings.max_portrait_bytes),
    )
    app[REGISTRY_KEY] = registry
    app[FACTORY_KEY] = factory
    app[PEERS_KEY] = peers
    app[TICKETS_KEY] = StartTickets(settings.start_ttl_s, max(16, 4 * registry.max_sessions))
    app[METRICS_KEY] = metrics_source
    app[PORTRAITS_KEY] = portraits
    app[SETTINGS_KEY] = settings
    app[ERRORS_KEY] = dict(errors or {})
    add_routes(app, static_dir)
    return app
