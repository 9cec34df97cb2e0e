"""HTTP routes: offer/answer, session delete, health, metrics, page config, static client.

Every error leaves as JSON `{"error": {"code": ..., "message": ...}}` with its status, and
never affects other sessions: a failing request only releases its own reservation. Signaling's
own errors (`signaling.errors`) carry their status and code; the errors of what it calls (the
session factory, the portrait sink) are domain errors that the app maps to one of them with
`create_app(errors=...)`, so the layers below never name an HTTP status.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from signaling.errors import (
    PayloadTooLarge,
    SignalingError,
    Unauthorized,
    UnsupportedMediaType,
)
from signaling.offer import Offer, parse_offer
from signaling.registry import PeerSession, SessionRegistry

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Domain error class -> the signaling error it is answered with (its status, code).
ErrorTable = Mapping[type[Exception], type[SignalingError]]


class SessionFactory(Protocol):
    async def __call__(self, session_id: str, offer: Offer) -> tuple[PeerSession, str]:
        """Create a session for `offer`; return it and the answer SDP. Raises a domain error
        from the app's error table for an offer it cannot use (answered as InvalidOffer)."""
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


REGISTRY_KEY = web.AppKey("registry", SessionRegistry)
FACTORY_KEY = web.AppKey("session_factory", SessionFactory)
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


@web.middleware
async def bearer_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    token = request.app[SETTINGS_KEY].token
    if token and request.path.startswith("/api/"):
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


async def post_offer(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS_KEY]
    offer = parse_offer(await read_body(request, settings.max_body_bytes, ("application/json",)))
    registry = request.app[REGISTRY_KEY]
    async with registry.reserve() as reservation:
        session, answer = await request.app[FACTORY_KEY](reservation.session_id, offer)
        reservation.commit(session)
    return web.json_response({"sdp": answer, "type": "answer", "session_id": session.id})


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


def add_page_routes(app: web.Application, static_dir: Path) -> None:
    """Serve the static web client and its page config (`GET /api/config`)."""
    index = static_dir / "index.html"

    async def page(request: web.Request) -> web.FileResponse:
        return web.FileResponse(index)

    app.router.add_get("/", page)
    app.router.add_static("/static/", static_dir, show_index=False)
    app.router.add_get("/api/config", get_config)


def add_routes(app: web.Application, static_dir: Path) -> None:
    """Register the signaling routes and the static web client on `app`."""
    add_page_routes(app, static_dir)
    app.router.add_post("/api/offer", post_offer)
    app.router.add_post("/api/portrait", post_portrait)
    app.router.add_delete("/api/sessions/{session_id}", delete_session)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)


def create_app(
    *,
    registry: SessionRegistry,
    factory: SessionFactory,
    portraits: PortraitSink,
    metrics_source: MetricsSource,
    settings: SignalingSettings,
    static_dir: Path,
    errors: ErrorTable | None = None,
) -> web.Application:
    # client_max_size makes aiohttp itself refuse larger bodies (413) before buffering them;
    # each route then applies its own, smaller limit while reading.
    app = web.Application(
        middlewares=[json_errors, bearer_auth],
        client_max_size=max(settings.max_body_bytes, settings.max_portrait_bytes),
    )
    app[REGISTRY_KEY] = registry
    app[FACTORY_KEY] = factory
    app[METRICS_KEY] = metrics_source
    app[PORTRAITS_KEY] = portraits
    app[SETTINGS_KEY] = settings
    app[ERRORS_KEY] = dict(errors or {})
    add_routes(app, static_dir)
    return app
