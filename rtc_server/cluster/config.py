"""`[cluster]` options: the process's role, the Redis directory and its timers.

Timers are chosen so that a dead worker leaves the directory within `ttl_s` (3 s): it
heartbeats every `heartbeat_s` (1 s), so two lost beats in a row are survived.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

Role = Literal["all", "worker", "gateway"]


@dataclass(frozen=True)
class ClusterConfig:
    # "all": one process serves the page, signaling and media (no Redis); "worker": media
    # and the conversation, registered in Redis; "gateway": the page and signaling only.
    role: Role = "all"
    # The worker directory: one Redis (or a primary with Sentinel), not Redis Cluster.
    # rediss:// for TLS; redis://user:password@host:port/db for an ACL user.
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Key prefix, so several clusters can share one Redis.
    namespace: str = "rtc"
    # Shared secret that signs worker registrations and gateway->worker requests (or from
    # the env var below); required for "worker" and "gateway".
    secret: str | None = None
    secret_env: str = "RTC_CLUSTER_SECRET"
    # Worker: the host the gateway reaches it at (default: server.host); the port is
    # server.port (or the one bound when that is 0).
    advertise: str | None = None
    # Worker: its id in the directory (default "<hostname>-<port>-<random>", new per start,
    # so a restarted worker never inherits the slots of its previous life).
    worker_id: str | None = None
    # Worker: seconds between heartbeats.
    heartbeat_s: float = 1.0
    # A worker record (and the sessions it reports) expires this long after its last beat.
    ttl_s: float = 3.0
    # A slot reserved by the gateway is held this long for the worker to accept the offer.
    reservation_ttl_s: float = 20.0
    # Gateway: longest wait for a worker's answer to a forwarded offer.
    forward_timeout_s: float = 15.0
    # Gateway: workers tried per offer (an unreachable or full one is skipped).
    forward_attempts: int = 2
    # Worker: after a drain request, close the remaining sessions after this long (0: wait
    # for them to end however long it takes).
    drain_timeout_s: float = 0.0
    # Redis connect and command timeout: a gateway answers 503 this soon when Redis is down.
    redis_timeout_s: float = 1.0

    def __post_init__(self) -> None:
        if self.heartbeat_s <= 0 or self.ttl_s < 2 * self.heartbeat_s:
            raise ValueError("heartbeat_s must be > 0 and ttl_s at least 2 * heartbeat_s")
        if self.reservation_ttl_s <= 0 or self.forward_timeout_s <= 0:
            raise ValueError("reservation_ttl_s and forward_timeout_s must be positive")
        if self.forward_attempts < 1:
            raise ValueError("forward_attempts must be at least 1")
        if self.drain_timeout_s < 0 or self.redis_timeout_s <= 0:
            raise ValueError("drain_timeout_s must be >= 0 and redis_timeout_s > 0")
        if not self.namespace or any(c in self.namespace for c in " :{}"):
            raise ValueError("namespace must be non-empty without spaces, ':' or braces")

    def resolved_secret(self) -> str | None:
        return self.secret or os.environ.get(self.secret_env) or None
