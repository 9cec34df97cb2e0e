"""Time-limited TURN credentials in coturn's `use-auth-secret` scheme (the "TURN REST API").

The page never gets a static TURN password. For each `/api/config` request we mint
`username = "<expiry unix seconds>:<user>"` and `credential = base64(HMAC-SHA1(secret,
username))`; coturn, started with `use-auth-secret` and the same `static-auth-secret`,
recomputes the HMAC and refuses the username once its expiry has passed. coturn checks it on
every ALLOCATE and REFRESH, so `ttl_s` must cover the longest session (an allocation whose
refresh is refused ends when its lifetime runs out, 10 minutes by default).

`user` is an opaque random id per request (it shows in coturn's logs and per-user quotas);
nothing about the person is put in it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RelayConfig:
    # TURN URLs handed out with time-limited credentials, e.g.
    # "turn:turn.example.org:3478?transport=udp"; empty = no TURN server.
    urls: tuple[str, ...] = ()
    # coturn's `static-auth-secret` (or from the env var below); required when urls are set.
    secret: str | None = None
    secret_env: str = "RTC_TURN_SECRET"
    # Lifetime of a credential; coturn refuses ALLOCATE/REFRESH after it, so it must cover
    # the longest session.
    ttl_s: int = 3600
    # The page sets iceTransportPolicy "relay": media always goes through TURN (hides the
    # client's addresses from the worker; costs a relay hop).
    relay_only: bool = False
    # The server's own peer connections also gather relay candidates (a worker behind a NAT
    # of its own; not needed when workers have reachable addresses).
    server_relay: bool = False

    def __post_init__(self) -> None:
        for url in self.urls:
            if not url.startswith(("turn:", "turns:")):
                raise ValueError(f"TURN url {url!r} must start with turn: or turns:")
        if self.ttl_s < 60:
            raise ValueError("ttl_s must be at least 60")

    def resolved_secret(self) -> str | None:
        return self.secret or os.environ.get(self.secret_env) or None

    def check(self) -> None:
        """Raise ValueError when TURN URLs are configured without a secret."""
        if self.urls and not self.resolved_secret():
            raise ValueError(f"relay.urls needs relay.secret (or ${self.secret_env})")


def turn_credentials(secret: str, user: str, ttl_s: int, now: float | None = None) -> tuple[
    str, str
]:
    """(username, credential) valid until `now + ttl_s` for coturn's use-auth-secret."""
    expiry = int(now if now is not None else time.time()) + ttl_s
    username = f"{expiry}:{user}"
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode()


def turn_ice_servers(config: RelayConfig, now: float | None = None) -> list[dict[str, Any]]:
    """The RTCIceServer dicts for the configured TURN URLs with fresh credentials ([] if none)."""
    secret = config.resolved_secret()
    if not config.urls or not secret:
        return []
    username, credential = turn_credentials(secret, secrets.token_hex(6), config.ttl_s, now)
    return [{"urls": list(config.urls), "username": username, "credential": credential}]


def page_ice_config(static_servers: list[dict[str, Any]], config: RelayConfig) -> dict[str, Any]:
    """What `/api/config` says about ICE: static servers plus fresh TURN credentials, and the
    transport policy the page must use."""
    return {
        "ice_servers": [*static_servers, *turn_ice_servers(config)],
        "ice_transport_policy": "relay" if config.relay_only else "all",
    }
