"""HMAC signatures with the cluster's shared secret.

Two things are signed (HMAC-SHA256):
- **Worker registrations**: the fields a worker writes into its directory record (id, URL,
  capacity, draining, its wall-clock time in ms and a per-process sequence number). A
  gateway uses only records whose signature verifies, whose time is within the record TTL of
  Redis's clock (an old record written back is stale) and whose sequence number is not lower
  than one it has already seen for that worker (a replay). Anyone who can write to Redis but
  lacks the secret can therefore not point the gateway at an address of their choosing.
- **Gateway -> worker requests**: a token `<claims>.<mac>` whose claims name the action
  (`offer`, `delete`, `drain`), the worker, the subject (the session id) and an expiry. A
  worker refuses an offer that no gateway reserved for it, and the same token twice.

Clocks of gateways, workers and Redis are assumed NTP-synchronised to well within the
record TTL (3 s by default).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass

from rtc_server.cluster.errors import ClusterUnauthorized, WrongWorker

TOKEN_HEADER = "X-Rtc-Cluster-Token"


def _mac(secret: str, text: str) -> str:
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


def registration_signature(
    secret: str, worker_id: str, url: str, capacity: int, draining: bool, ts_ms: int, seq: int
) -> str:
    fields = ("v1", "register", worker_id, url, str(capacity), str(int(draining)), str(ts_ms),
              str(seq))
    return _mac(secret, "\n".join(fields))


@dataclass(frozen=True)
class Claims:
    action: str  # "offer", "delete" or "drain"
    worker_id: str
    subject: str  # the session id ("" for drain)
    expires: float  # unix seconds


def sign_request(secret: str, claims: Claims) -> str:
    body = json.dumps(
        {"a": claims.action, "w": claims.worker_id, "s": claims.subject, "e": claims.expires},
        separators=(",", ":"),
    )
    encoded = base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")
    return f"{encoded}.{_mac(secret, encoded)}"


def request_token(secret: str, action: str, worker_id: str, subject: str, ttl_s: float) -> str:
    return sign_request(secret, Claims(action, worker_id, subject, time.time() + ttl_s))


def verify_request(
    secret: str, token: str | None, action: str, worker_id: str, now: float | None = None
) -> Claims:
    """The token's claims if it is valid for `action` on this worker; raises otherwise.

    ClusterUnauthorized (401): missing, malformed, bad signature, expired, other action.
    WrongWorker (403): a valid token for another worker.
    """
    if not token:
        raise ClusterUnauthorized(f"missing {TOKEN_HEADER} header")
    encoded, _, mac = token.partition(".")
    if not hmac.compare_digest(mac, _mac(secret, encoded)):
        raise ClusterUnauthorized("invalid cluster token signature")
    try:
        data = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
        claims = Claims(str(data["a"]), str(data["w"]), str(data["s"]), float(data["e"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterUnauthorized("malformed cluster token") from exc
    if claims.expires < (now if now is not None else time.time()):
        raise ClusterUnauthorized("cluster token expired")
    if claims.action != action:
        raise ClusterUnauthorized(f"cluster token is for {claims.action!r}, not {action!r}")
    if claims.worker_id != worker_id:
        raise WrongWorker(
            f"this is worker {worker_id!r}; the request was signed for {claims.worker_id!r}"
        )
    return claims
