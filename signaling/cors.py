"""CORS for an app whose page is served from another origin (an SDK in someone's web app).

A browser calls our API cross-origin only when the response names its origin. The page's
`POST`/`PATCH` with `Content-Type: application/json` (and `Authorization` when a token is
configured) is preceded by a preflight `OPTIONS`, which carries no credentials: it is
answered here, before authentication, for the allowed origins only. Every other response to
an allowed origin, errors included, carries `Access-Control-Allow-Origin`, so the page can
read the JSON error instead of seeing an opaque network failure.

`origins` are exact (`https://app.example.com`, scheme and port included) or `*`. No
cookies are involved (the token is a header), so credentials are not allowed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ALLOW_METHODS = "GET, POST, PATCH, DELETE, OPTIONS"
ALLOW_HEADERS = "Authorization, Content-Type"
MAX_AGE_S = 600  # how long a browser may reuse a preflight's answer


def _allowed(origin: str | None, origins: tuple[str, ...]) -> str | None:
    if not origin or not origins:
        return None
    if "*" in origins:
        return "*"
    return origin if origin in origins else None


def cors_middleware(origins: tuple[str, ...]) -> Middleware:
    """The middleware for `origins` (empty: same-origin only, no CORS headers at all)."""

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        allowed = _allowed(request.headers.get("Origin"), origins)
        preflight = request.method == "OPTIONS" and "Access-Control-Request-Method" in (
            request.headers
        )
        if preflight:
            if allowed is None:
                return web.Response(status=403, text="origin not allowed")
            return web.Response(status=204, headers={
                "Access-Control-Allow-Origin": allowed,
                "Access-Control-Allow-Methods": ALLOW_METHODS,
                "Access-Control-Allow-Headers": ALLOW_HEADERS,
                "Access-Control-Max-Age": str(MAX_AGE_S),
                "Vary": "Origin",
            })
        response = await handler(request)
        if allowed is not None:
            response.headers["Access-Control-Allow-Origin"] = allowed
            response.headers["Vary"] = "Origin"
        return response

    return cors
