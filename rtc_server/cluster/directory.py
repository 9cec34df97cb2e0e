"""The worker directory in Redis: signed worker records with a TTL, slots, session routes.

Keys (prefix `<ns>`, `cluster.namespace`):
- `<ns>:workers`            SET of worker ids (pruned of ids whose record expired);
- `<ns>:worker:<id>`        HASH url, capacity, draining, ts, seq, sig; PEXPIRE ttl, renewed
                            by every heartbeat, so a dead worker drops out within the TTL;
- `<ns>:slots:<id>`         ZSET session id -> expiry (ms, Redis clock): the worker's used
                            slots. The gateway adds a member when it reserves (held for
                            `reservation_ttl_s`); the worker's heartbeat re-adds every live
                            session with a fresh lease; a member that nobody renews expires;
- `<ns>:session:<sid>`      STRING worker id, PX lease: where DELETE goes.

Capacity is counted in Redis, not from load reports: one Lua script reads each candidate's
slot count, picks the one with the most free slots and adds the reservation, all atomically,
so two gateways cannot book the same last slot (the race of a periodic load report that
livekit/agents #4884 describes). The gateway passes only records it has verified (their
signature, see `Snapshot`), with the URL and capacity it verified; the script books a
candidate only if its record still exists (not expired), still names that URL and is not
draining, and counts free slots against the verified capacity. The offer then goes to the
verified URL, so a record rewritten in Redis by someone without the secret can neither
redirect an offer nor raise a capacity. All times are Redis's `TIME`, so workers' and
gateways' clocks do not skew the slot leases (only the signed registration time is the
worker's clock).

The scripts name every key they touch in KEYS. They assume one Redis (or a primary with
Sentinel), not Redis Cluster. Every Redis failure surfaces as `DirectoryUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from rtc_server.cluster.errors import DirectoryUnavailable
from rtc_server.cluster.signing import registration_signature
from signaling.errors import SessionExists

logger = logging.getLogger(__name__)

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: workers set, worker hash, slots zset, session keys...; ARGV: id, url, capacity,
# draining, ts, seq, sig, ttl_ms, lease_ms, then one session id per session key.
HEARTBEAT = _NOW + """
redis.call('HSET', KEYS[2], 'url', ARGV[2], 'capacity', ARGV[3], 'draining', ARGV[4],
           'ts', ARGV[5], 'seq', ARGV[6], 'sig', ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[8])
redis.call('SADD', KEYS[1], ARGV[1])
for i = 4, #KEYS do
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[9]), ARGV[6 + i])
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[9])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[9]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[9])
end
return now
"""

# KEYS: session key, then (worker hash, slots zset) per candidate; ARGV: session id,
# hold_ms, then (worker id, verified url, verified capacity) per candidate.
# Returns {1, index, free slots left} | {0} (all full) | {-1} (session id taken).
RESERVE = _NOW + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {-1} end
local best, best_free = 0, 0
for i = 1, (#KEYS - 1) / 2 do
  local rec = redis.call('HMGET', KEYS[2 * i], 'url', 'draining')
  if rec[1] == ARGV[3 * i + 1] and rec[2] == '0' then
    redis.call('ZREMRANGEBYSCORE', KEYS[2 * i + 1], '-inf', now)
    local free = tonumber(ARGV[3 * i + 2]) - redis.call('ZCARD', KEYS[2 * i + 1])
    if free > best_free then best, best_free = i, free end
  end
end
if best == 0 then return {0} end
local hold = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2 * best + 1], now + hold, ARGV[1])
if redis.call('PTTL', KEYS[2 * best + 1]) < hold then
  redis.call('PEXPIRE', KEYS[2 * best + 1], hold)
end
redis.call('SET', KEYS[1], ARGV[3 * best], 'PX', hold)
return {1, best, best_free - 1}
"""

# KEYS: slots zset, session key; ARGV: session id, worker id.
RELEASE = """
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
return 1
"""

# KEYS: workers set, worker hash, slots zset, session keys...; ARGV: worker id.
DEREGISTER = """
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3])
for i = 4, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
return 1
"""

# KEYS: workers set, then worker hashes; ARGV: their ids. Drops ids whose record is gone.
PRUNE = """
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then redis.call('SREM', KEYS[1], ARGV[i - 1]) end
end
return 1
"""


@dataclass(frozen=True)
class WorkerRecord:
    """What a worker registers; `sig` covers every other field (see `signing`)."""

    worker_id: str
    url: str
    capacity: int
    draining: bool
    ts_ms: int
    seq: int
    sig: str

    @classmethod
    def signed(
        cls, secret: str, worker_id: str, url: str, capacity: int, draining: bool, ts_ms: int,
        seq: int,
    ) -> WorkerRecord:
        sig = registration_signature(secret, worker_id, url, capacity, draining, ts_ms, seq)
        return cls(worker_id, url, capacity, draining, ts_ms, seq, sig)

    def signature_ok(self, secret: str) -> bool:
        expected = registration_signature(
            secret, self.worker_id, self.url, self.capacity, self.draining, self.ts_ms, self.seq
        )
        return expected == self.sig

    def fields(self) -> dict[str, str]:
        return {
            "url": self.url, "capacity": str(self.capacity), "draining": str(int(self.draining)),
            "ts": str(self.ts_ms), "seq": str(self.seq), "sig": self.sig,
        }

    @classmethod
    def parse(cls, worker_id: str, fields: dict[str, str]) -> WorkerRecord | None:
        try:
            return cls(
                worker_id, fields["url"], int(fields["capacity"]), fields["draining"] == "1",
                int(fields["ts"]), int(fields["seq"]), fields["sig"],
            )
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class WorkerState:
    record: WorkerRecord
    used: int  # slots held: live sessions and pending reservations

    @property
    def free(self) -> int:
        return 0 if self.record.draining else max(0, self.record.capacity - self.used)


@dataclass(frozen=True)
class Snapshot:
    """The verified, fresh workers at one instant; `rejected` maps other ids to why."""

    workers: tuple[WorkerState, ...]
    rejected: dict[str, str] = field(default_factory=dict)

    @property
    def live(self) -> tuple[WorkerState, ...]:
        return tuple(w for w in self.workers if not w.record.draining)

    def totals(self) -> dict[str, int]:
        live = self.live
        return {
            "workers": len(live),
            "draining": len(self.workers) - len(live),
            "slots": sum(w.record.capacity for w in live),
            "used": sum(min(w.used, w.record.capacity) for w in live),
            "free": sum(w.free for w in live),
        }


def connect(url: str, timeout_s: float) -> aioredis.Redis:
    """A client that fails fast (one retry, no backoff): a gateway answers 503 at once."""
    client: aioredis.Redis = aioredis.Redis.from_url(
        url, decode_responses=True, socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 1),
    )
    return client


class Directory:
    def __init__(self, client: aioredis.Redis, namespace: str, secret: str) -> None:
        self._redis = client
        self._ns = namespace
        self._secret = secret
        self._seen_seq: dict[str, int] = {}  # highest sequence number seen per worker
        self._last_rejected: dict[str, str] = {}
        self._heartbeat = client.register_script(HEARTBEAT)
        self._reserve = client.register_script(RESERVE)
        self._release = client.register_script(RELEASE)
        self._deregister = client.register_script(DEREGISTER)
        self._prune = client.register_script(PRUNE)

    # --- keys ---------------------------------------------------------------------------

    @property
    def workers_key(self) -> str:
        return f"{self._ns}:workers"

    def worker_key(self, worker_id: str) -> str:
        return f"{self._ns}:worker:{worker_id}"

    def slots_key(self, worker_id: str) -> str:
        return f"{self._ns}:slots:{worker_id}"

    def session_key(self, session_id: str) -> str:
        return f"{self._ns}:session:{session_id}"

    @asynccontextmanager
    async def _guard(self, what: str) -> AsyncIterator[None]:
        try:
            yield
        except (RedisError, OSError) as exc:
            raise DirectoryUnavailable(f"worker directory unavailable ({what}): {exc}") from exc

    async def close(self) -> None:
        await self._redis.aclose()

    # --- worker side --------------------------------------------------------------------

    async def heartbeat(
        self, record: WorkerRecord, sessions: Sequence[str], ttl_ms: int, lease_ms: int
    ) -> None:
        """Write the record with a TTL and renew the lease of each live session."""
        keys = [self.workers_key, self.worker_key(record.worker_id),
                self.slots_key(record.worker_id), *(self.session_key(s) for s in sessions)]
        f = record.fields()
        args: list[Any] = [record.worker_id, f["url"], f["capacity"], f["draining"], f["ts"],
                           f["seq"], f["sig"], ttl_ms, lease_ms, *sessions]
        async with self._guard("heartbeat"):
            await self._heartbeat(keys=keys, args=args)

    async def deregister(self, worker_id: str, sessions: Sequence[str] = ()) -> None:
        keys = [self.workers_key, self.worker_key(worker_id), self.slots_key(worker_id),
                *(self.session_key(s) for s in sessions)]
        async with self._guard("deregister"):
            await self._deregister(keys=keys, args=[worker_id])

    async def release(self, worker_id: str, session_id: str) -> None:
        """Free a session's slot and its route (the session ended or was never set up)."""
        async with self._guard("release"):
            await self._release(
                keys=[self.slots_key(worker_id), self.session_key(session_id)],
                args=[session_id, worker_id],
            )

    # --- gateway side -------------------------------------------------------------------

    async def snapshot(self, ttl_ms: int) -> Snapshot:
        """Every worker whose record verifies and is fresh, with its used slot count."""
        async with self._guard("read"):
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.time()
                pipe.smembers(self.workers_key)
                (secs, micros), ids = await pipe.execute()
            now_ms = int(secs) * 1000 + int(micros) // 1000
            ordered = sorted(ids)
            async with self._redis.pipeline(transaction=False) as pipe:
                for worker_id in ordered:
                    pipe.hgetall(self.worker_key(worker_id))
                    pipe.zcount(self.slots_key(worker_id), f"({now_ms}", "+inf")
                replies = await pipe.execute()
            gone = [w for i, w in enumerate(ordered) if not replies[2 * i]]
            if gone:
                await self._prune(
                    keys=[self.workers_key, *(self.worker_key(w) for w in gone)], args=gone
                )
        states, rejected = [], {}
        for i, worker_id in enumerate(ordered):
            fields, used = replies[2 * i], int(replies[2 * i + 1])
            if not fields:
                continue
            record = WorkerRecord.parse(worker_id, fields)
            reason = self._reject_reason(record, now_ms, ttl_ms)
            if reason is not None:
                rejected[worker_id] = reason
                continue
            assert record is not None
            states.append(WorkerState(record, used))
        if rejected != self._last_rejected:  # log a change, not every read
            self._last_rejected = rejected
            if rejected:
                logger.warning("worker records refused", extra={"refused": rejected})
        return Snapshot(tuple(states), rejected)

    def _reject_reason(self, record: WorkerRecord | None, now_ms: int, ttl_ms: int) -> str | None:
        if record is None:
            return "malformed"
        if not record.signature_ok(self._secret):
            return "bad_signature"
        if not now_ms - ttl_ms <= record.ts_ms <= now_ms + ttl_ms:
            return "stale"
        seen = self._seen_seq.get(record.worker_id, -1)
        if record.seq < seen:
            return "replayed"
        self._seen_seq[record.worker_id] = record.seq
        return None

    async def reserve(
        self, session_id: str, candidates: Sequence[WorkerRecord], hold_ms: int
    ) -> tuple[WorkerRecord, int] | None:
        """Atomically take a slot on the candidate with the most free slots.

        Returns (worker, free slots left there), or None when every candidate is full.
        """
        if not candidates:
            return None
        keys = [self.session_key(session_id)]
        args: list[Any] = [session_id, hold_ms]
        for record in candidates:
            keys += [self.worker_key(record.worker_id), self.slots_key(record.worker_id)]
            args += [record.worker_id, record.url, record.capacity]
        async with self._guard("reserve"):
            result = await self._reserve(keys=keys, args=args)
        if int(result[0]) == -1:
            raise SessionExists(f"session id {session_id!r} is already routed")
        if int(result[0]) == 0:
            return None
        return candidates[int(result[1]) - 1], int(result[2])

    async def locate(self, session_id: str) -> str | None:
        """The id of the worker that holds `session_id`, if any."""
        async with self._guard("locate"):
            value = await self._redis.get(self.session_key(session_id))
        return str(value) if value is not None else None
