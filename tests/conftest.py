"""Shared fixtures: the real engines, loaded once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rtc_server.engine_set import Engines


@pytest.fixture(scope="session")
def agent_engines() -> Iterator[Engines]:
    """ASR, LLM, TTS and face on the embedded defaults (slow to load: share them)."""
    from rtc_server.engine_set import load_engines
    from tests.support.agent import agent_config

    engines = load_engines(agent_config())
    yield engines
    engines.close()
