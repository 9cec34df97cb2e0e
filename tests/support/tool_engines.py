"""The bank agent with the example tools (engines/tools/examples/bank.toml), on the shared
engines: only the LLM is loaded again (its cached prompt holds the bank persona and the tools'
declarations); ASR, TTS and face are `agent_engines`' own, so the fixture costs one model load."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.llm import create_llm
from engines.tools.spec import ToolSet
from rtc_server.config import Config
from rtc_server.engine_set import Engines
from testkit.agent import agent_config, patient

BANK_TOOLS = Path(__file__).resolve().parents[2] / "engines" / "tools" / "examples" / "bank.toml"


def bank_config() -> Config:
    """`agent_config()` as the bank with its tools (greedy decoding: the persona's
    temperature 0), no greeting: what the server is started with beside `bank_engines`,
    with far deadlines (`patient`)."""
    config = patient(agent_config(greeting=""))
    llm = dataclasses.replace(config.llm, persona="bank", tools=str(BANK_TOOLS))
    return dataclasses.replace(config, llm=llm)


@pytest.fixture(scope="session")
def bank_engines(agent_engines: Engines) -> Iterator[Engines]:
    """`agent_engines` with the bank's LLM and tools (closed at the end; the rest is shared)."""
    llm = create_llm(bank_config().llm)
    try:
        yield dataclasses.replace(agent_engines, llm=llm, tools=ToolSet.load(BANK_TOOLS))
    finally:
        llm.close()
