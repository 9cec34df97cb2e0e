"""No invented figures: a figure that neither the facts nor the conversation hold ends the
answer with the persona's "I don't have that information", whatever the delta boundaries."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engines.llm import ChatMessage, LLMConfig, Notice
from engines.llm.grounding import GroundedLLM, figures, unit_figures
from tests.support.fakes import ScriptedLLM

FACTS = (
    "The customer line is 0800 123 4567. Branches open from 9:00 to 13:00 on Saturday. "
    "The daily limit is 10,000 pounds. Card payments abroad cost 2.75%."
)
UNKNOWN = "Actually, I don't have that information."


async def said(deltas: Sequence[str], question: str = "Tell me.") -> list[str]:
    llm = GroundedLLM(ScriptedLLM(deltas), FACTS, UNKNOWN)
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
    # a tool's JSON amount and a date's day, said the way people say them
    assert figures("23.40 pounds on the 5th") == figures('{"amount": 23.4, "day": "05"}')


def test_the_bank_persona_checks_figures_by_default() -> None:
    from engines.llm import create_llm

    config = LLMConfig(engine="openai", persona="bank", resilient=False)
    assert isinstance(create_llm(config), GroundedLLM)
    assert not isinstance(create_llm(LLMConfig(engine="openai", resilient=False)), GroundedLLM)
    off = LLMConfig(engine="openai", persona="bank", resilient=False, known_figures_only=False)
    assert not isinstance(create_llm(off), GroundedLLM)


def test_unit_forms() -> None:
    assert unit_figures("about 2 to 3 working days") == {("2", "day"), ("3", "day")}
    assert unit_figures("the 24-hour line, £5 each, 10,000 pounds, 2.75% of it") == {
        ("24", "hour"), ("5", "pound"), ("10000", "pound"), ("2.75", "%")}
    assert unit_figures("9:00 to 13:00, 18 or older") == set()


UNIT_FACTS = (FACTS + " Transfers arrive within 2 hours. International ones take 1 to 3 working "
              "days.")


@pytest.mark.parametrize("n", [1, 3, 100])
async def test_a_known_figure_with_another_unit_ends_the_answer(n: int) -> None:
    llm = GroundedLLM(ScriptedLLM(split_every(
        "A cheque clears in 2 to 3 working days, usually.", n)), UNIT_FACTS, UNKNOWN)
    out = [d async for d in llm.stream([ChatMessage("user", "Cheques?")], max_new_tokens=50)]
    assert isinstance(out[-1], Notice) and "A cheque clears in ".startswith("".join(out[:-1]))


@pytest.mark.parametrize("n", [1, 4, 100])
async def test_known_figures_with_their_units_pass(n: int) -> None:
    text = ("Transfers arrive within 2 hours; abroad it takes 1 to 3 business days and costs "
            "£10,000 at most per day. You must be 18 years old.")
    llm = GroundedLLM(ScriptedLLM(split_every(text, n)), UNIT_FACTS + " Be 18 or older.",
                      UNKNOWN)
    out = [d async for d in llm.stream([ChatMessage("user", "Tell me.")], max_new_tokens=50)]
    assert "".join(out) == text and not any(isinstance(d, Notice) for d in out)
