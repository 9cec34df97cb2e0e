"""Shared fixtures: the real engines, loaded once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from rtc_server.engine_set import Engines

# Property tests draw the same examples on every run and every machine: a suite that fails
# by chance blocks everyone, and one that passes by chance hides a regression.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")


@pytest.fixture(scope="session")
def agent_engines() -> Iterator[Engines]:
    """ASR, LLM, TTS and face on the embedded defaults (slow to load: share them)."""
    from rtc_server.engine_set import load_engines
    from tests.support.agent import agent_config

    engines = load_engines(agent_config())
    yield engines
    engines.close()
