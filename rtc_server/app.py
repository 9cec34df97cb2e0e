"""The server: builds the aiohttp app, owns the session registry, metrics, the engines and
the shared read-only avatar renderer, and creates one Session per offer.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

from media.idle import FrameSource, StillPortrait, default_portrait
from rtc_server.config import Config
from rtc_server.echo import EchoBehaviour
from rtc_server.engine_set import Engines, load_engines
from rtc_server.errors import (
    CandidateRejected,
    ConfigError,
    OfferRejected,
    PortraitRejected,
    UnknownPortrait,
)
from rtc_server.ice import restrict_host_candidates_to_loopback
from rtc_server.metrics import Metrics
from rtc_server.page import signaling_settings
from rtc_server.portraits import PortraitStore
from rtc_server.render_device import place_warp
from rtc_server.rtvi.channel import RtviChannel
from rtc_server.session import AppChannel, Behaviour, Session
from signaling.errors import InvalidOffer, InvalidPortrait, PortraitNotFound, SessionNotFound
from signaling.http import ErrorTable, create_app
from signaling.offer import Offer
from signaling.registry import SessionRegistry
from signaling.smallwebrtc import IceCandidate, InvalidCandidate
from web_client import STATIC_DIR

logger = logging.getLogger(__name__)
# How signaling answers the domain errors of what it calls (status and code: docs/api.md).
HTTP_ERRORS: ErrorTable = {
    OfferRejected: InvalidOffer,
    CandidateRejected: InvalidCandidate,
    PortraitRejected: InvalidPortrait,
    UnknownPortrait: PortraitNotFound,
}
PREBUILT_PACKAGE = "pipecat_ai_small_webrtc_prebuilt"


def prebuilt_client_dir() -> Path | None:
    """The built web client of `pipecat-ai-small-webrtc-prebuilt`, if installed. Found
    without importing the package (its `frontend` module needs FastAPI, which we do not
    use: only the static files are served)."""
    spec = importlib.util.find_spec(PREBUILT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "client" / "dist"
    return folder if (folder / "index.html").is_file() else None


def load_portrait_image(path: str | None) -> np.ndarray:
    if path is None:
        return default_portrait()
    from engines.errors import EngineError
    from engines.portrait import load_portrait

    try:
        return load_portrait(path)
    except (EngineError, OSError) as exc:
        raise ConfigError(f"portrait {path!r}: {exc}") from exc


def build_renderer(image: np.ndarray, config: Config, *, uploaded: bool = False) -> Any:
    """Fit the portrait's landmarks once and precompute its warp mesh (shared by sessions);
    the configured portrait's fit is cached across starts, an upload's is not."""
    from engines.portrait import detect_portrait_landmarks
    from media.avatar import AvatarRenderer

    landmarks = detect_portrait_landmarks(image, cache=not uploaded)
    renderer = AvatarRenderer(image, landmarks, config.media.width, config.media.height)
    return place_warp(renderer, config.media.render_device)


class Server:
    def __init__(self, config: Config, engines: Engines | None = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.registry = SessionRegistry(config.server.max_sessions)
        media = config.media
        portrait = load_portrait_image(media.portrait)
        self.engines: Engines | None = None
        self.renderer: Any = None
        self.still = StillPortrait(portrait, media.width, media.height)
        self._owns_engines = engines is None
        if config.server.mode == "agent":
            self.engines = engines or load_engines(config)
            try:
                self.renderer = build_renderer(portrait, config)
            except Exception as exc:
                raise ConfigError(f"portrait: {exc}") from exc
        self.portraits = PortraitStore(
            self._build_uploaded if self.engines is not None else None,
            self.engines.pools.render if self.engines is not None else None,
        )
        self._seeds = itertools.count(1)
        self.prebuilt = prebuilt_client_dir() if config.embed.prebuilt else None
        if config.embed.prebuilt and self.prebuilt is None:
            raise ConfigError("embed.prebuilt: pipecat-ai-small-webrtc-prebuilt is not "
                              "installed (make clients)")
        if config.ice.loopback_only:
            restrict_host_candidates_to_loopback()

    def _build_uploaded(self, data: bytes) -> Any:
        from engines.portrait import load_portrait

        return build_renderer(load_portrait(data), self.config, uploaded=True)

    def _behaviour(self, session: Session) -> Behaviour:
        if self.engines is None:
            return EchoBehaviour(session, self.config.vad)
        from rtc_server.agent import AgentBehaviour

        return AgentBehaviour(session, self.engines, self.config)

    def _frames(self, portrait_id: str | None) -> FrameSource:
        renderer = self.portraits.get(portrait_id) if portrait_id else self.renderer
        if renderer is None:
            return self.still
        # Per-session idle motion (seeded), over the shared read-only renderer.
        frames: FrameSource = renderer.session(self.config.media.fps, next(self._seeds))
        return frames

    def _app_channel(self, session: Session) -> AppChannel:
        return RtviChannel(session, self.config.embed)

    async def create_session(self, session_id: str, offer: Offer) -> tuple[Session, str]:
        persona = self.config.llm.persona
        if offer.persona is not None and offer.persona != persona:
            # One persona per process: its prompt is the LLM's cached prefix. Serve another
            # one from another process (or worker) and send the app there.
            raise OfferRejected(f"persona {offer.persona!r} is not served here (only {persona!r})")
        session = Session(
            session_id,
            config=self.config,
            frames=self._frames(offer.portrait_id),
            metrics=self.metrics,
            render_executor=self.engines.pools.render if self.engines else None,
            behaviour_factory=self._behaviour,
            on_closed=self.registry.discard,
            app_channel=self._app_channel,
        )
        answer = await session.accept(offer)
        return session, answer

    def _session(self, pc_id: str) -> Session:
        session = self.registry.get(pc_id)  # SessionNotFound: 404
        if not isinstance(session, Session):
            raise SessionNotFound(f"no session {pc_id!r}")
        return session

    async def renegotiate(self, pc_id: str, offer: Offer, *, restart: bool) -> str:
        return await self._session(pc_id).renegotiate(offer, restart=restart)

    async def add_ice_candidates(self, pc_id: str, candidates: Sequence[IceCandidate]) -> None:
        await self._session(pc_id).add_ice_candidates(candidates)

    async def close_all(self) -> None:
        for session in self.registry:
            await session.close()

    def build_app(self) -> web.Application:
        settings = signaling_settings(self.config)
        if self.prebuilt is not None:
            settings = dataclasses.replace(settings, extra_static=(("/prebuilt/", self.prebuilt),))
        app = create_app(
            registry=self.registry,
            factory=self.create_session,
            peers=self,
            portraits=self.portraits,
            metrics_source=self.metrics,
            settings=settings,
            static_dir=STATIC_DIR,
            errors=HTTP_ERRORS,
        )

        async def on_shutdown(app: web.Application) -> None:
            await self.close_all()

        async def on_cleanup(app: web.Application) -> None:
            if self.engines is not None and self._owns_engines:
                self.engines.close()  # stops the LLM's decode thread and the worker pools

        app.on_shutdown.append(on_shutdown)
        app.on_cleanup.append(on_cleanup)
        return app
