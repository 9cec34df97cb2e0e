"""The server's thread pools: sized by the usable cores, except for engines whose calls wait
on a device (`device_calls`): a worker of one core on a GPU box runs its sessions' decodes
and chunks side by side."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rtc_server.engine_set import Pools, device_calls


def _threads(pools: Pools) -> tuple[int, int, int]:
    return pools.asr._max_workers, pools.tts._max_workers, pools.tts_threads  # noqa: SLF001


@pytest.mark.parametrize(("cores", "side_by_side"), [(1.0, 1), (0.5, 1), (2.0, 2), (16.0, 2)])
def test_cpu_engines_get_a_thread_per_core_up_to_two(cores: float, side_by_side: int) -> None:
    pools = Pools.sized(cores)
    try:
        assert _threads(pools) == (side_by_side, side_by_side, side_by_side)
    finally:
        pools.shutdown()


def test_engines_on_a_device_get_their_own_concurrency_on_one_core() -> None:
    pools = Pools.sized(1.0, asr_calls=4, tts_calls=2)
    try:
        assert _threads(pools) == (4, 2, 2)  # the speech queue as wide as its pool
    finally:
        pools.shutdown()
    pools = Pools.sized(2.0, asr_calls=1, tts_calls=0)  # never fewer than the cores give
    try:
        assert _threads(pools) == (2, 2, 2)
    finally:
        pools.shutdown()


def test_device_calls_reads_the_engines_attribute() -> None:
    assert device_calls(SimpleNamespace(device_calls=4)) == 4
    assert device_calls(SimpleNamespace()) == 0  # CPU engines say nothing
    assert device_calls(SimpleNamespace(device_calls=-1)) == 0
    assert device_calls(SimpleNamespace(device_calls="4")) == 0
