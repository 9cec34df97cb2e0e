"""NVIDIA MPS for the workers on one GPU: their CUDA work through one MPS server, so the GPU
runs the workers' kernels side by side instead of time-slicing between their contexts.

Why: each worker is its own process with its own CUDA context, and a GPU without MPS gives
one context at a time the whole GPU. On the H200 six processes stepping the LLM's decode
graph together took 23.6 ms a step each (4.1 alone), 11.3 ms under MPS; with 32 sessions
over 6 workers the LLM's first token came 112 ms after the endpoint instead of 320 and the
end of turn (Whisper's pause decode on the GPU) 399-435 ms instead of 560 (bench/RESULTS.md,
section gpu). Nothing changes for one worker.

`mps_server(directory)` starts a control daemon (`nvidia-cuda-mps-control -d`) whose pipe and
log directories are private to `directory`: only processes given the returned environment
use it, other CUDA programs on the machine do not. It leaves the GPU's settings alone
(compute mode, clocks) and is told to quit on exit. A machine whose administrator runs MPS
as a service needs none of this: the workers use that server by default.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

CONTROL = "nvidia-cuda-mps-control"
QUIT_TIMEOUT_S = 30.0


class MpsUnavailable(RuntimeError):
    """No MPS control program here, or it would not start."""


def mps_env(directory: Path) -> dict[str, str]:
    """The environment that points CUDA programs at the MPS server of `directory` (its two
    directories made here)."""
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(directory / "pipe"),
           "CUDA_MPS_LOG_DIRECTORY": str(directory / "log")}
    for path in env.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    return env


async def _control(program: str, env: dict[str, str], *args: str, stdin: bytes | None = None,
                   ) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        program, *args, env={**os.environ, **env},
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(process.communicate(stdin), QUIT_TIMEOUT_S)
    return await process.wait(), out.decode(errors="replace").strip()


@asynccontextmanager
async def mps_server(directory: Path, program: str = CONTROL) -> AsyncIterator[dict[str, str]]:
    """An MPS control daemon for the processes given the yielded environment (see the
    module docstring); quit on exit. `MpsUnavailable` when it cannot start."""
    found = shutil.which(program)
    if found is None:
        raise MpsUnavailable(f"{program} not found: MPS needs NVIDIA's driver utilities "
                             "(run without MPS, or install them)")
    env = mps_env(directory)
    code, out = await _control(found, env, "-d")
    if code != 0:
        raise MpsUnavailable(f"{program} -d failed ({code}): {out or 'no output'}; see "
                             f"{env['CUDA_MPS_LOG_DIRECTORY']}")
    logger.info("MPS server for the workers (pipe %s)", env["CUDA_MPS_PIPE_DIRECTORY"])
    try:
        yield env
    finally:
        try:
            code, out = await _control(found, env, stdin=b"quit\n")
            if code != 0:
                logger.warning("MPS quit failed (%d): %s", code, out)
        except (OSError, TimeoutError) as exc:
            logger.warning("MPS quit failed: %s", exc)
