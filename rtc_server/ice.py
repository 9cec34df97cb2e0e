"""ICE configuration for the server's peer connections.

Operators configure STUN/TURN servers; the default is none, so the server never contacts a
public STUN server. `restrict_host_candidates_to_loopback()` is the one place that works
around aioice gathering host candidates from every interface except loopback.
"""

from __future__ import annotations

import logging

import aioice.ice
from aiortc import RTCConfiguration, RTCIceServer

from rtc_server.config import IceConfig
from signaling.turn_credentials import RelayConfig, turn_ice_servers

logger = logging.getLogger(__name__)


def rtc_configuration(config: IceConfig, relay: RelayConfig | None = None) -> RTCConfiguration:
    # An explicit (possibly empty) list: aiortc's own default names a public STUN server.
    servers = [
        RTCIceServer(urls=list(s.urls), username=s.username, credential=s.credential)
        for s in config.servers
    ]
    if relay is not None and relay.server_relay:  # fresh time-limited credentials per session
        servers += [
            RTCIceServer(urls=s["urls"], username=s["username"], credential=s["credential"])
            for s in turn_ice_servers(relay)
        ]
    return RTCConfiguration(iceServers=servers)


def _loopback_host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
    return ["127.0.0.1"] if use_ipv4 else []


def restrict_host_candidates_to_loopback() -> None:
    """Make aioice offer only 127.0.0.1 host candidates, process-wide.

    aioice has no option for this; replacing `aioice.ice.get_host_addresses` is the only known
    hook (it is looked up at gathering time). Used for tests and local demos in a loopback-only
    network namespace, where aioice would otherwise gather no candidate at all. Idempotent.
    """
    if aioice.ice.get_host_addresses is not _loopback_host_addresses:
        aioice.ice.get_host_addresses = _loopback_host_addresses
        logger.info("ICE host candidates restricted to 127.0.0.1")
