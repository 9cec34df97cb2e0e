"""The worker directory against a real redis-server: registration with a TTL, the atomic
reservation (no double booking), release, and the records a gateway must refuse."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rtc_server.cluster.directory import Directory, WorkerRecord, connect
from rtc_server.cluster.errors import DirectoryUnavailable
from rtc_server.cluster.local import free_port, start_redis
from tests.support.cluster import need, redis_hash

SECRET = "directory-test-secret"
TTL_MS = 2000


def record(worker_id: str, capacity: int = 2, *, seq: int = 1, draining: bool = False,
           ts_ms: int | None = None, secret: str = SECRET) -> WorkerRecord:
    ts = ts_ms if ts_ms is not None else int(time.time() * 1000)
    return WorkerRecord.signed(secret, worker_id, f"http://127.0.0.1:1/{worker_id}", capacity,
                               draining, ts, seq)


@pytest.fixture
async def redis_url(tmp_path: Path) -> AsyncIterator[str]:
    need("redis-server")
    child, url = await start_redis(tmp_path)
    try:
        yield url
    finally:
        await child.stop()


@pytest.fixture
async def directory(redis_url: str) -> AsyncIterator[Directory]:
    d = Directory(connect(redis_url, 1.0), "t", SECRET)
    try:
        yield d
    finally:
        await d.close()


async def register(d: Directory, rec: WorkerRecord, sessions: tuple[str, ...] = (),
                   ttl_ms: int = TTL_MS) -> None:
    await d.heartbeat(rec, sessions, ttl_ms=ttl_ms, lease_ms=ttl_ms)


async def test_registered_workers_are_listed_with_their_slots(directory: Directory) -> None:
    await register(directory, record("a", 3), ("s1",))
    await register(directory, record("b", 2))
    snap = await directory.snapshot(TTL_MS)
    assert {w.record.worker_id: (w.used, w.free) for w in snap.workers} == {
        "a": (1, 2), "b": (0, 2)
    }
    assert snap.totals() == {"workers": 2, "draining": 0, "slots": 5, "used": 1, "free": 4}
    assert await directory.locate("s1") == "a"


async def test_concurrent_reservations_never_overbook(redis_url: str) -> None:
    """Two gateways (two clients) race 40 reservations for 5 slots: exactly 5 succeed and no
    worker gets more than its capacity (the load-report race of livekit/agents #4884)."""
    gateways = [Directory(connect(redis_url, 2.0), "t", SECRET) for _ in range(2)]
    try:
        await register(gateways[0], record("a", 3))
        await register(gateways[0], record("b", 2))
        snap = await gateways[0].snapshot(TTL_MS)
        candidates = [w.record for w in snap.workers]

        async def one(i: int) -> str | None:
            placed = await gateways[i % 2].reserve(f"s{i}", candidates, 10_000)
            return placed[0].worker_id if placed else None

        results = await asyncio.gather(*(one(i) for i in range(40)))
        placed = [r for r in results if r is not None]
        assert sorted(placed) == ["a", "a", "a", "b", "b"]
        snap = await gateways[1].snapshot(TTL_MS)
        assert snap.totals()["free"] == 0 and snap.totals()["used"] == 5
    finally:
        for g in gateways:
            await g.close()


async def test_reserve_prefers_most_free_and_release_frees(directory: Directory) -> None:
    await register(directory, record("a", 4), ("x1", "x2", "x3"))
    await register(directory, record("b", 2))
    candidates = [w.record for w in (await directory.snapshot(TTL_MS)).workers]
    placed = await directory.reserve("new", candidates, 10_000)
    assert placed is not None and placed[0].worker_id == "b" and placed[1] == 1
    assert await directory.locate("new") == "b"
    await directory.release("b", "new")
    assert await directory.locate("new") is None
    snap = await directory.snapshot(TTL_MS)
    assert {w.record.worker_id: w.used for w in snap.workers} == {"a": 3, "b": 0}


async def test_unrenewed_reservation_and_dead_worker_expire(directory: Directory) -> None:
    """A slot nobody renews is free again after its hold; a worker that stops beating drops
    out of the directory after its TTL (and its id is pruned from the set)."""
    await register(directory, record("a", 1))
    await register(directory, record("dead", 1), ttl_ms=300)
    candidates = [w.record for w in (await directory.snapshot(TTL_MS)).workers if
                  w.record.worker_id == "a"]
    assert await directory.reserve("s1", candidates, 200) is not None
    assert await directory.reserve("s2", candidates, 200) is None  # full
    await asyncio.sleep(0.5)  # past both the 200 ms hold and the 300 ms TTL
    assert await directory.reserve("s3", candidates, 10_000) is not None
    snap = await directory.snapshot(TTL_MS)
    assert [w.record.worker_id for w in snap.workers] == ["a"]
    assert await directory._redis.smembers(directory.workers_key) == {"a"}


async def test_heartbeat_turns_a_reservation_into_a_lease(directory: Directory) -> None:
    await register(directory, record("a", 1))
    candidates = [w.record for w in (await directory.snapshot(TTL_MS)).workers]
    assert await directory.reserve("s1", candidates, 200) is not None
    await register(directory, record("a", 1, seq=2), ("s1",))  # the worker accepted it
    await asyncio.sleep(0.4)  # past the reservation's hold, within the lease
    assert (await directory.snapshot(TTL_MS)).totals()["used"] == 1
    assert await directory.locate("s1") == "a"


async def test_draining_worker_gets_no_reservation(directory: Directory) -> None:
    await register(directory, record("a", 2, draining=True))
    snap = await directory.snapshot(TTL_MS)
    assert snap.totals() == {"workers": 0, "draining": 1, "slots": 0, "used": 0, "free": 0}
    assert await directory.reserve("s1", [w.record for w in snap.workers], 10_000) is None


async def test_forged_record_is_refused_and_never_reserved(directory: Directory) -> None:
    """Someone who can write Redis but lacks the secret registers an address of their own."""
    await register(directory, record("real", 1))
    await register(directory, record("evil", 8, secret="guessed"))
    await directory._redis.hset(directory.worker_key("bare"), mapping={"url": "http://x"})
    await directory._redis.sadd(directory.workers_key, "bare")
    snap = await directory.snapshot(TTL_MS)
    assert [w.record.worker_id for w in snap.workers] == ["real"]
    assert snap.rejected == {"evil": "bad_signature", "bare": "malformed"}
    placed = await directory.reserve("s1", [w.record for w in snap.workers], 10_000)
    assert placed is not None and placed[0].worker_id == "real"
    assert await directory.reserve("s2", [w.record for w in snap.workers], 10_000) is None


async def test_replayed_and_stale_records_are_refused(directory: Directory) -> None:
    old = record("a", 2, seq=1)
    await register(directory, record("a", 2, seq=5))
    assert len((await directory.snapshot(TTL_MS)).workers) == 1  # seq 5 seen
    await register(directory, old)  # an earlier, validly signed record written back
    snap = await directory.snapshot(TTL_MS)
    assert snap.workers == () and snap.rejected == {"a": "replayed"}
    # a validly signed record from long ago, written back without a TTL: a stale entry
    stale = record("b", 2, ts_ms=int(time.time() * 1000) - 60_000)
    await directory._redis.hset(directory.worker_key("b"), mapping=redis_hash(stale.fields()))
    await directory._redis.sadd(directory.workers_key, "b")
    snap = await directory.snapshot(TTL_MS)
    assert snap.rejected["b"] == "stale"


async def test_reservation_trusts_only_what_the_gateway_verified(directory: Directory) -> None:
    """The gateway passes the URL and capacity it verified: a record rewritten in Redis
    afterwards (by someone without the secret) to another URL is not booked, and a forged
    larger capacity does not count; a draining flag takes effect at once."""
    await register(directory, record("a", 1))
    verified = [w.record for w in (await directory.snapshot(TTL_MS)).workers]
    forged = WorkerRecord.signed("guessed", "a", "http://evil:1", 50, False,
                                 int(time.time() * 1000), 2)
    await directory._redis.hset(directory.worker_key("a"), mapping=redis_hash(forged.fields()))
    assert await directory.reserve("s1", verified, 10_000) is None
    await register(directory, record("a", 1, seq=3))  # the real worker's next beat
    assert await directory.reserve("s1", verified, 10_000) is not None
    await directory._redis.hset(directory.worker_key("a"), mapping={"capacity": "50"})
    assert await directory.reserve("s2", verified, 10_000) is None  # verified capacity: 1
    await directory.release("a", "s1")
    await register(directory, record("a", 1, seq=4, draining=True))
    assert await directory.reserve("s3", verified, 10_000) is None


async def test_unreachable_redis_is_a_typed_error() -> None:
    d = Directory(connect(f"redis://127.0.0.1:{free_port()}/0", 0.5), "t", SECRET)
    try:
        with pytest.raises(DirectoryUnavailable, match="unavailable"):
            await d.snapshot(TTL_MS)
        with pytest.raises(DirectoryUnavailable):
            await d.heartbeat(record("a"), (), ttl_ms=TTL_MS, lease_ms=TTL_MS)
    finally:
        await d.close()
