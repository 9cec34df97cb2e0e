"""What the page is told (`GET /api/config`) and the signaling settings, from the config.

Shared by the single process and the cluster gateway, so both hand out the same page config:
mode, video size, ICE servers with fresh TURN credentials per request, the transport policy.
"""

from __future__ import annotations

from typing import Any

from rtc_server.config import Config
from signaling.http import SignalingSettings
from signaling.turn_credentials import page_ice_config


def signaling_settings(config: Config, **page: Any) -> SignalingSettings:
    """Settings for signaling's routes; `page` adds keys to the page config."""
    media = config.media
    static = [s.as_dict() for s in config.ice.servers]
    return SignalingSettings(
        token=config.server.token(),
        max_body_bytes=config.server.max_body_bytes,
        page_config={
            "mode": config.server.mode,
            "video": {"width": media.width, "height": media.height, "fps": media.fps},
            **page,
        },
        dynamic_config=lambda: page_ice_config(static, config.relay),
        cors_origins=config.embed.cors_origins,
        start_ttl_s=config.embed.start_ttl_s,
    )
