"""Waiting for the GPU without spinning a core.

CUDA's default wait busy-polls while the process has no more contexts than the machine has
cores: every read-back of a token or a batch (`.tolist()`, `stream.synchronize()`) then
holds a core at 100% for as long as the device works. With several worker processes sharing
one GPU that is CPU the video needs (py-spy on the H200 machine, 32 sessions: ~0.07 of a core
per worker in the LLM's wait alone, bench/RESULTS.md, gpu). An event recorded with
`blocking=True` puts the waiting thread to sleep until the device reaches it instead.
"""

from __future__ import annotations

from typing import Any


def wait_for_device(torch: Any, device: Any = None) -> None:
    """Sleep until the work queued on `device`'s current CUDA stream is done."""
    done = torch.cuda.Event(blocking=True)
    done.record(torch.cuda.current_stream(device))
    done.synchronize()
