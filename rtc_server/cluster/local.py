"""The real pieces of a cluster as child processes on loopback: redis-server, coturn, an
OpenAI-compatible LLM server, workers and a gateway.

Used by `make cluster` (`python -m rtc_server.cluster`), the cluster tests and
`bench/cluster.py`. Each `start_*` returns a `Child` once the program has said it is ready
(a line on its output, never a sleep); `Child.stop()` ends it (SIGINT/SIGTERM, then SIGKILL
after a grace period) and is idempotent. A child's output goes to a log file.

Ports are picked free at start when given as 0 (a short race with other programs is
possible, as with any pick-then-bind).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]


class ChildFailed(RuntimeError):
    """A child process exited or stayed silent before saying it was ready."""


def free_port(udp_too: bool = False) -> int:
    """A TCP port (and the same UDP port when asked) that is free on 127.0.0.1 now."""
    while True:
        with socket.socket() as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
        if not udp_too:
            return port
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def free_port_run(count: int) -> int:
    """A TCP port P with P .. P + count - 1 all free on 127.0.0.1 now: the launcher's `--port
    P` puts its gateway on P and its workers on the ports after it."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    while True:
        port = free_port()
        if port + count - 1 > 65535:
            continue
        with ExitStack() as held:
            try:
                for p in range(port, port + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", p))
            except OSError:
                continue
            return port


@dataclass
class Child:
    name: str
    process: asyncio.subprocess.Process
    log_path: Path
    ready_line: str = ""
    _copier: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def kill(self) -> None:
        """SIGKILL: a crash, for failure drills."""
        if self.running:
            self.process.kill()

    def send(self, sig: int) -> None:
        if self.running:
            self.process.send_signal(sig)

    async def wait(self, timeout_s: float | None = None) -> int:
        return await asyncio.wait_for(self.process.wait(), timeout_s)

    async def stop(self, sig: int = signal.SIGTERM, grace_s: float = 10.0) -> None:
        try:
            if self.running:
                self.process.send_signal(sig)
                try:
                    await asyncio.wait_for(self.process.wait(), grace_s)
                except TimeoutError:
                    logger.warning("child did not stop; killing", extra={"child": self.name})
                    self.process.kill()
                    await self.process.wait()
        finally:
            if self._copier is not None:
                self._copier.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._copier


async def _copy(stream: asyncio.StreamReader, log: Path) -> None:
    with log.open("ab") as out:
        while line := await stream.readline():
            out.write(line)
            out.flush()


def share_cores(cores: Sequence[int], workers: int) -> tuple[list[frozenset[int]], frozenset[int]]:
    """`cores` split for `workers` worker processes on one box: one disjoint group each
    (n // (workers + 1) cores, at least one) and the rest for everything else (the gateway,
    redis, a benchmark's peers; all of `cores` when none is left). Pinned to its group, a
    worker sizes its thread pools, LLM threads and BLAS from its share (`usable_cores` reads
    the affinity), not from the whole box: each of 4-8 workers taking all 16 cores as its
    own left a load average of 40-48 on the H200 machine (bench/RESULTS.md, gpu)."""
    ordered = sorted(cores)
    size = max(1, len(ordered) // (workers + 1))
    groups = [frozenset(ordered[i * size:(i + 1) * size]) for i in range(workers)]
    if any(not g for g in groups):
        raise ValueError(f"{len(ordered)} cores cannot give {workers} workers one each")
    rest = frozenset(ordered[workers * size:]) or frozenset(ordered)
    return groups, rest


def pin_here(workers: int) -> tuple[list[frozenset[int]], frozenset[int]]:
    """This process's cores shared for `workers` workers (`share_cores`); this process, and
    the children it starts from now on, pinned to the rest. The workers' groups and the rest."""
    groups, rest = share_cores(sorted(os.sched_getaffinity(0)), workers)
    os.sched_setaffinity(0, rest)
    return groups, rest


async def start_child(
    name: str, argv: list[str], ready: str, log_dir: Path, *, timeout_s: float = 60.0,
    env: dict[str, str] | None = None, cpus: frozenset[int] | None = None,
) -> Child:
    """Start `argv`; return once a line of its output (stdout+stderr) contains `ready`.
    `cpus`: the cores it may run on (its affinity), else the launcher's."""
    log_path = log_dir / f"{name}.log"
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL, cwd=REPO, env={**os.environ, **(env or {})},
        start_new_session=True,  # a Ctrl-C in the terminal reaches the launcher only
        preexec_fn=None if cpus is None else functools.partial(  # noqa: PLW1509 - one syscall
            os.sched_setaffinity, 0, cpus),
    )
    assert process.stdout is not None
    child = Child(name, process, log_path)

    async def until_ready() -> str:
        assert process.stdout is not None
        with log_path.open("ab") as out:
            while line := await process.stdout.readline():
                out.write(line)
                if ready in line.decode(errors="replace"):
                    return line.decode(errors="replace").strip()
        raise ChildFailed(f"{name} exited ({await process.wait()}) before it was ready; "
                          f"see {log_path}")

    try:
        child.ready_line = await asyncio.wait_for(until_ready(), timeout_s)
    except BaseException as exc:
        await child.stop(signal.SIGKILL, grace_s=5)
        if isinstance(exc, TimeoutError):
            raise ChildFailed(f"{name} not ready after {timeout_s:.0f} s; see {log_path}") \
                from exc
        raise
    child._copier = asyncio.get_running_loop().create_task(
        _copy(process.stdout, log_path), name=f"log:{name}"
    )
    return child


def have(program: str) -> bool:
    return shutil.which(program) is not None


async def start_redis(
    log_dir: Path, port: int = 0, program: str = "redis-server"
) -> tuple[Child, str]:
    """redis-server on 127.0.0.1 without persistence; returns it and its URL. `program`: the
    server's name on PATH or its path (a carried binary, its libraries on LD_LIBRARY_PATH)."""
    port = port or free_port()
    argv = [program, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
            "--appendonly", "no", "--dir", str(log_dir), "--protected-mode", "yes"]
    child = await start_child("redis", argv, "Ready to accept connections", log_dir)
    return child, f"redis://127.0.0.1:{port}/0"


async def start_coturn(
    log_dir: Path, secret: str, port: int = 0, relay_ports: tuple[int, int] = (49160, 49260)
) -> tuple[Child, str]:
    """coturn on 127.0.0.1 with the use-auth-secret REST scheme; returns it and its URL.

    coturn refuses to relay to loopback peers unless told (`allow-loopback-peers`), which a
    loopback-only test and demo need; never use that option in production. TLS/DTLS
    listeners are off (a deployment puts `turns:` on 443 with a certificate instead).
    """
    port = port or free_port(udp_too=True)
    argv = [
        "turnserver", "-n", "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1",
        f"--listening-port={port}", f"--min-port={relay_ports[0]}",
        f"--max-port={relay_ports[1]}", "--use-auth-secret", f"--static-auth-secret={secret}",
        "--realm=rtc-avatar.local", "--no-tls", "--no-dtls", "--no-cli",
        "--allow-loopback-peers", "--log-file=stdout", "--simple-log", "--verbose",
        f"--pidfile={log_dir / 'turnserver.pid'}", f"--userdb={log_dir / 'turndb'}",
    ]
    child = await start_child("coturn", argv, "Total General servers", log_dir)
    return child, f"turn:127.0.0.1:{port}?transport=udp"


def default_gguf() -> str:
    """The bundled GGUF, assembled into the cache by the LLM engine's own helper."""
    from engines.llm.model_files import resolve_gguf

    return str(resolve_gguf(None))


def llama_server_argv(
    model: str, port: int, threads: int = 1, batch_threads: int = 2
) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server on the GGUF (CPU boxes).

    It runs one generation at a time. `--interrupt_requests False` is essential when several
    sessions share it: by default a new request ends the stream in progress early (with
    [DONE]), so one session's question would cut another's answer short. One decode thread
    and two for prompts, as the in-process engine (`[llm] threads`): on cores shared with
    workers, two decode threads collapse.
    """
    return [sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1",
            "--port", str(port), "--n_threads", str(threads),
            "--n_threads_batch", str(batch_threads), "--n_ctx", "4096",
            "--interrupt_requests", "False"]


def shared_llm_keys(url: str) -> dict[str, str | float]:
    """The [llm] keys of workers using a shared server at `url`: a request may queue behind
    other sessions' answers on a server that generates one at a time, so allow more silence
    than the default."""
    return {"engine": "openai", "base_url": url, "read_timeout_s": 30.0}



async def start_llm_server(log_dir: Path, argv: list[str]) -> Child:
    """Any OpenAI-compatible server command (llama_cpp.server prints uvicorn's line)."""
    return await start_child("llm", argv, "Uvicorn running on", log_dir, timeout_s=600)


async def start_worker(
    log_dir: Path, name: str, config_path: Path, redis_url: str, secret: str, *,
    port: int = 0, timeout_s: float = 600.0, extra: tuple[str, ...] = (),
    cpus: frozenset[int] | None = None, env: dict[str, str] | None = None,
) -> tuple[Child, str]:
    """`python -m rtc_server --role worker`; returns it and its URL once it has registered.
    `env`: more environment for it (e.g. `rtc_server.cluster.mps`'s)."""
    argv = [sys.executable, "-m", "rtc_server", "--role", "worker", "--config", str(config_path),
            "--redis", redis_url, "--port", str(port), *extra]
    child = await start_child(name, argv, "rtc-avatar worker", log_dir, timeout_s=timeout_s,
                              env={**(env or {}), "RTC_CLUSTER_SECRET": secret}, cpus=cpus)
    return child, child.ready_line.rsplit(" at ", 1)[1].rstrip("/")


async def start_gateway(
    log_dir: Path, config_path: Path, redis_url: str, secret: str, *, port: int = 0,
) -> tuple[Child, str]:
    """`python -m rtc_server --role gateway`; returns it and its URL."""
    argv = [sys.executable, "-m", "rtc_server", "--role", "gateway", "--config",
            str(config_path), "--redis", redis_url, "--port", str(port)]
    child = await start_child("gateway", argv, "rtc-avatar gateway", log_dir,
                              env={"RTC_CLUSTER_SECRET": secret})
    return child, child.ready_line.rsplit(" at ", 1)[1].rstrip("/")


@dataclass
class RunningCluster:
    redis: Child
    redis_url: str
    gateway: Child
    url: str
    workers: list[tuple[Child, str]]


@asynccontextmanager
async def run_cluster(
    log_dir: Path, config_path: Path, secret: str, *, workers: int = 2, gateway_port: int = 0,
    worker_ports: tuple[int, ...] = (), worker_timeout_s: float = 600.0,
    redis_server: str = "redis-server", worker_cpus: Sequence[frozenset[int]] = (),
    worker_env: dict[str, str] | None = None,
) -> AsyncIterator[RunningCluster]:
    """redis-server (`redis_server`: its name or path), `workers` workers (started together;
    worker i on the cores `worker_cpus[i]` when given, `share_cores`; `worker_env` added to
    their environment) and a gateway on one config file; everything is stopped on exit
    (workers with SIGINT: their sessions close at once)."""
    async with AsyncExitStack() as stack:
        redis, redis_url = await start_redis(log_dir, program=redis_server)
        stack.push_async_callback(redis.stop)
        ports = worker_ports or (0,) * workers
        started = await asyncio.gather(*(
            start_worker(log_dir, f"worker{i}", config_path, redis_url, secret, port=port,
                         timeout_s=worker_timeout_s, env=worker_env,
                         cpus=worker_cpus[i] if i < len(worker_cpus) else None)
            for i, port in enumerate(ports)
        ), return_exceptions=True)
        for result in started:
            if isinstance(result, tuple):
                stack.push_async_callback(result[0].stop, signal.SIGINT)
        for result in started:
            if isinstance(result, BaseException):
                raise result
        gateway, url = await start_gateway(log_dir, config_path, redis_url, secret,
                                           port=gateway_port)
        stack.push_async_callback(gateway.stop)
        yield RunningCluster(redis, redis_url, gateway, url,
                             [r for r in started if isinstance(r, tuple)])
