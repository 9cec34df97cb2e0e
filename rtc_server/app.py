"""The server: builds the aiohttp app, owns the session registry, metrics and shared
read-only assets (portrait), and creates one Session per offer.
"""

from __future__ import annotations

import logging

import numpy as np
from aiohttp import web

from media.idle import FrameSource, StillPortrait, default_portrait
from rtc_server.config import Config
from rtc_server.echo import EchoBehaviour
from rtc_server.errors import ConfigError
from rtc_server.ice import restrict_host_candidates_to_loopback
from rtc_server.metrics import Metrics
from rtc_server.session import Behaviour, Session
from signaling.http import SignalingSettings, create_app
from signaling.offer import Offer
from signaling.registry import SessionRegistry
from web_client import STATIC_DIR

logger = logging.getLogger(__name__)


def load_portrait_image(path: str | None) -> np.ndarray:
    if path is None:
        return default_portrait()
    from skimage import io

    try:
        image = np.asarray(io.imread(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read portrait {path!r}: {exc}") from exc
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ConfigError(f"portrait {path!r} is not an RGB image")
    return image[:, :, :3].astype(np.uint8)


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.metrics = Metrics()
        self.registry = SessionRegistry(config.server.max_sessions)
        media = config.media
        self.idle: FrameSource = StillPortrait(
            load_portrait_image(media.portrait), media.width, media.height
        )
        if config.ice.loopback_only:
            restrict_host_candidates_to_loopback()

    def _behaviour(self, session: Session) -> Behaviour:
        return EchoBehaviour(session, self.config.vad)

    async def create_session(self, session_id: str, offer: Offer) -> tuple[Session, str]:
        session = Session(
            session_id,
            config=self.config,
            idle=self.idle,
            metrics=self.metrics,
            behaviour_factory=self._behaviour,
            on_closed=self.registry.discard,
        )
        answer = await session.accept(offer)
        return session, answer

    async def close_all(self) -> None:
        for session in self.registry:
            await session.close()

    def page_config(self) -> dict[str, object]:
        media = self.config.media
        return {
            "ice_servers": [s.as_dict() for s in self.config.ice.servers],
            "mode": self.config.server.mode,
            "video": {"width": media.width, "height": media.height, "fps": media.fps},
        }

    def build_app(self) -> web.Application:
        settings = SignalingSettings(
            token=self.config.server.token(),
            max_body_bytes=self.config.server.max_body_bytes,
            page_config=self.page_config(),
        )
        app = create_app(
            registry=self.registry,
            factory=self.create_session,
            metrics_source=self.metrics,
            settings=settings,
            static_dir=STATIC_DIR,
        )

        async def on_shutdown(app: web.Application) -> None:
            await self.close_all()

        app.on_shutdown.append(on_shutdown)
        return app
