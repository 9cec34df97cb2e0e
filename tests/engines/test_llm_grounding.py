"""No invented figures: a figure that neither the facts nor the conversation hold ends the
answer with the persona's "I don't have that information", whatever the delta boundaries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from engines.llm import ChatMessage, LLMConfig, Notice
from engines.llm.grounding import GroundedLLM, figures

FACTS = (
    "The customer line is 0800 123 4567. Branches open from 9:00 to 13:00 on Saturday. "
    "The daily limit is 10,000 pounds. Card payments abroad cost 2.75%."
)
UNKNOWN = "Actually, I don't have that information."


class Words:
    def __init__(self, deltas: Sequence[str]) -> None:
        self.deltas = deltas
        self.closed = False

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        try:
            for delta in self.deltas:
                yield delta
        finally:
            self.closed = True

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        pass

    def close(self) -> None:
        pass


async def said(deltas: Sequence[str], question: str = "Tell me.") -> list[str]:
    llm = GroundedLLM(Words(deltas), FACTS, UNKNOWN)
    return [d async for d in llm.stream([ChatMessage("user", question)], max_new_tokens=50)]


def split_every(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100])
async def test_known_figures_pass_in_any_form(n: int) -> None:
    text = ("Call 0800 123 4567. We open at 9 am until 1 pm, that is 9:00 to 13:00. "
            "The limit is 10000 pounds, and card payments abroad cost 2.75%.")
    out = await said(split_every(text, n))
    assert "".join(out) == text and not any(isinstance(d, Notice) for d in out)


@pytest.mark.parametrize("n", [1, 2, 5, 100])
async def test_an_invented_figure_ends_the_answer(n: int) -> None:
    text = "Our branch in Leeds is at 123 Main Street, and it is lovely."
    out = await said(split_every(text, n))
    assert isinstance(out[-1], Notice) and out[-1].kind == "unknown"
    spoken = "".join(out[:-1])
    assert "123" not in spoken and "lovely" not in spoken
    assert text.startswith(spoken)


async def test_a_phone_number_that_differs_by_one_group_is_unknown() -> None:
    out = await said(split_every("Call 0800 123 9999 now.", 2))
    assert out[-1] == UNKNOWN + " "


async def test_figures_from_the_conversation_may_be_repeated() -> None:
    out = await said(["You want to send ", "250", " pounds."], "Can I send 250 pounds?")
    assert "".join(out) == "You want to send 250 pounds."


def test_figure_forms() -> None:
    assert figures("0800 123 4567") == {"08001234567"}
    assert {"13:00", "13", "1", "1:00"} <= figures("at 13:00")
    assert figures("10,000 pounds") == {"10000"}
    assert figures("2.75%.") == {"2.75"}
    assert figures("no figures here") == set()


def test_the_bank_persona_checks_figures_by_default() -> None:
    from engines.llm import create_llm

    config = LLMConfig(engine="openai", persona="bank", resilient=False)
    assert isinstance(create_llm(config), GroundedLLM)
    assert not isinstance(create_llm(LLMConfig(engine="openai", resilient=False)), GroundedLLM)
    off = LLMConfig(engine="openai", persona="bank", resilient=False, known_figures_only=False)
    assert not isinstance(create_llm(off), GroundedLLM)
