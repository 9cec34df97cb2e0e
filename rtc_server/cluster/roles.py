"""Start a worker or a gateway process from the configuration (`python -m rtc_server --role`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rtc_server.cluster.directory import Directory, connect
from rtc_server.config import Config
from rtc_server.errors import ConfigError


def cluster_secret(config: Config) -> str:
    secret = config.cluster.resolved_secret()
    if not secret:
        raise ConfigError(
            f"--role {config.cluster.role} needs cluster.secret (or ${config.cluster.secret_env})"
        )
    return secret


def check_worker(config: Config) -> None:
    from rtc_server.cluster.worker import advertised_url

    try:
        advertised_url(config, config.server.port)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _directory(config: Config, secret: str) -> Directory:
    cluster = config.cluster
    return Directory(connect(cluster.redis_url, cluster.redis_timeout_s), cluster.namespace,
                     secret)


def prepare_role(config: Config) -> Callable[[], None]:
    """Check the options (ConfigError) and load what the role needs (a worker's engines);
    return the call that runs the process as `config.cluster.role` until it stops."""
    secret = cluster_secret(config)
    if config.cluster.role == "gateway":
        from rtc_server.cluster.gateway import serve_gateway

        async def gateway() -> None:
            await serve_gateway(config, _directory(config, secret), secret)

        return lambda: asyncio.run(gateway())
    check_worker(config)
    from rtc_server.app import Server
    from rtc_server.cluster.worker import serve_worker

    server = Server(config)  # loads the engines (agent mode) before serving

    async def worker() -> None:
        await serve_worker(server, _directory(config, secret), secret)

    return lambda: asyncio.run(worker())
