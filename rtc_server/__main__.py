"""`python -m rtc_server [--host H] [--port P] [--config FILE] [--mode M] [--role R]`: run the
server (`--role all`, the default), or one worker or gateway of a cluster.
`python -m rtc_server calibrate [--config FILE]`: measure this machine afresh (the cache is
rewritten), print the table and the profile it leads to."""

from __future__ import annotations

import argparse
import logging
import sys

from aiohttp import web

from common.logs import setup_logging
from engines.errors import EngineError
from rtc_server.config import load_config
from rtc_server.dataconf import replace_path
from rtc_server.errors import ConfigError

logger = logging.getLogger("rtc_server")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rtc_server", description=__doc__)
    parser.add_argument("--host", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="TCP port (default 8080)")
    parser.add_argument("--config", help="TOML config file (see config.example.toml)")
    parser.add_argument("--mode", choices=["agent", "echo"], help="session behaviour")
    parser.add_argument("--log-level", help="DEBUG, INFO (default), WARNING, ...")
    parser.add_argument(
        "--loopback-only", action="store_true",
        help="offer only 127.0.0.1 ICE candidates (local demos, tests)",
    )
    parser.add_argument(
        "--role", choices=["all", "worker", "gateway"],
        help="all: one process (default); worker/gateway: part of a cluster (see README)",
    )
    parser.add_argument("--redis", help="cluster directory, e.g. redis://127.0.0.1:6379/0")
    parser.add_argument("--advertise", help="worker: host the gateway reaches it at")
    return parser.parse_args(argv)


def calibrate(argv: list[str]) -> int:
    """Measure afresh and print what the server would choose here (`[profile]`)."""
    from rtc_server.profile import fit

    parser = argparse.ArgumentParser(prog="rtc_server calibrate", description=calibrate.__doc__)
    parser.add_argument("--config", help="TOML config file (see config.example.toml)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    try:
        config = load_config(args.config)
        if config.profile.mode == "fixed":  # the command's point is to measure
            config = replace_path(config, "profile.mode", "auto")
        fitted = fit(replace_path(config, "server.mode", "agent"), fresh=True)
    except (ConfigError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert fitted.calibration is not None
    print(fitted.calibration.table())
    print()
    print(fitted.describe())
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["calibrate"]:
        return calibrate(argv[1:])
    args = parse_args(argv)
    try:
        config = load_config(args.config)
        for key, value in (
            ("server.host", args.host), ("server.port", args.port), ("server.mode", args.mode),
            ("server.log_level", args.log_level),
            ("ice.loopback_only", True if args.loopback_only else None),
            ("cluster.role", args.role), ("cluster.redis_url", args.redis),
            ("cluster.advertise", args.advertise),
        ):
            if value is not None:
                config = replace_path(config, key, value)
        setup_logging(config.server.log_level)
        try:
            config.relay.check()
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        if config.cluster.role != "all":
            from rtc_server.cluster.roles import prepare_role

            serve_role = prepare_role(config)
        else:
            from rtc_server.app import Server

            server = Server(config)
    except (ConfigError, EngineError) as exc:  # a bad option, file or model: named, no trace
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if config.cluster.role != "all":
        serve_role()
        return 0
    host, port = config.server.host, config.server.port
    url_host = f"[{host}]" if ":" in host else host

    async def announce(app: web.Application) -> None:
        print(f"rtc-avatar ({config.server.mode} mode) at http://{url_host}:{port}/", flush=True)

    app = server.build_app()
    app.on_startup.append(announce)
    web.run_app(app, host=host, port=port, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
