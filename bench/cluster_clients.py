"""The client processes of bench/cluster.py: its sessions' peers split over processes of
their own (one process's GIL would cap every peer's video decoding), each running its part of
the conversation (testkit/conversation.py).

A client process (`python bench/cluster.py --client-part`) speaks JSON lines, one each way:
  stdin:  {"url", "first", "count", "questions", "timeout_s"}  -> it connects its peers
  stdout: READY {"workers": [...]}                               (every peer is connected)
  stdin:  {"t0", "together", "round_s"}                          (the barrier: the start)
  stdout: RESULT {"answers": [...], "sessions": [...]}
Its log goes to stderr. It ends with its parent (bench.server_process._end_with_parent).
`start_clients` (the benchmark's side) starts them and waits for every READY.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.server_process import _end_with_parent
from rtc_server.ice import restrict_host_candidates_to_loopback
from testkit.conversation import Schedule, close_peers, connect_peers, split, talk

log = logging.getLogger("bench")
READY, RESULT = "READY ", "RESULT "
READY_TIMEOUT_S = 300.0  # a client process's peers connected
SCRIPT = Path(__file__).resolve().with_name("cluster.py")


async def _line() -> dict[str, Any]:
    """The next JSON line of stdin (a blocking pipe read, off the event loop)."""
    line = await asyncio.to_thread(sys.stdin.readline)
    if not line:
        raise EOFError("the benchmark closed the pipe")
    value: dict[str, Any] = json.loads(line)
    return value


def _say(prefix: str, value: object) -> None:
    print(prefix + json.dumps(value), flush=True)


async def client_part() -> int:
    """A client process's life (module docstring); the exit code."""
    restrict_host_candidates_to_loopback()
    spec = await _line()
    peers = await connect_peers(spec["url"], spec["count"])
    try:
        _say(READY, {"workers": [p.answer.get("worker_id") for p in peers]})
        schedule = Schedule(**(await _line()))
        _say(RESULT, await talk(peers, spec["first"], spec["questions"], spec["timeout_s"],
                                schedule))
    finally:
        await close_peers(peers)
    return 0


@dataclass
class ClientProcess:
    """A client process (bench/cluster_clients.py's protocol) and its sessions."""

    process: asyncio.subprocess.Process
    first: int
    count: int
    workers: tuple[str, ...] = ()

    async def line(self, prefix: str, timeout_s: float) -> Any:
        """The next protocol line starting with `prefix`, decoded (other lines are passed to
        the log)."""
        assert self.process.stdout is not None

        async def read() -> Any:
            assert self.process.stdout is not None
            while raw := await self.process.stdout.readline():
                text = raw.decode(errors="replace").rstrip("\n")
                if text.startswith(prefix):
                    return json.loads(text[len(prefix):])
                log.info("client %d: %s", self.first, text)
            raise RuntimeError(f"client process for sessions {self.first}..: exited "
                               f"({await self.process.wait()}) before its {prefix.strip()}")

        return await asyncio.wait_for(read(), timeout_s)

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode())

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
        await self.process.wait()


async def start_clients(
    url: str, sessions: int, processes: int, questions: int, timeout_s: float
) -> list[ClientProcess]:
    """The client processes (`python bench/cluster.py --client-part`), each with its peers
    connected (they said READY); all stopped again on a failure."""
    clients: list[ClientProcess] = []
    try:
        for first, count in split(sessions, processes):
            process = await asyncio.create_subprocess_exec(
                sys.executable, str(SCRIPT), "--client-part", cwd=SCRIPT.parents[1],
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                preexec_fn=_end_with_parent,  # noqa: PLW1509 - only prctl, no locks or threads
            )
            client = ClientProcess(process, first, count)
            clients.append(client)
            client.send(json.dumps({"url": url, "first": first, "count": count,
                                    "questions": questions, "timeout_s": timeout_s}) + "\n")
        ready = await asyncio.gather(*(c.line(READY, READY_TIMEOUT_S) for c in clients))
        for client, said in zip(clients, ready, strict=True):
            client.workers = tuple(said["workers"])
    except BaseException:
        await asyncio.gather(*(c.stop() for c in clients), return_exceptions=True)
        raise
    return clients


def schedule_message(schedule: Schedule) -> str:
    return json.dumps(asdict(schedule)) + "\n"
