"""LLM building blocks without a model: history budget, stop strings, personas, resilience
wrapper (holding phrase, apology, answer cache, cancellation) around scripted fake engines."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.llm import ChatMessage, Notice, ResilientLLM
from engines.llm.errors import InvalidInputError, LLMError, ModelLoadError
from engines.llm.history import PER_MESSAGE_OVERHEAD, approx_tokens, fit_history
from engines.llm.personas import PERSONAS, system_prompt
from engines.llm.resilience import AnswerCache
from engines.llm.stops import StopFilter, until_stop
from tests.support.fakes import ScriptedLLM


def words(text: str) -> int:
    return len(text.split())


def conversation(turns: int) -> list[ChatMessage]:
    msgs = [ChatMessage("system", "sys prompt here")]
    for i in range(turns):
        msgs += [
            ChatMessage("user", f"question {i} " * 3),
            ChatMessage("assistant", f"answer {i} " * 5),
        ]
    return [*msgs, ChatMessage("user", "final question now")]


def test_history_keeps_system_and_newest_pairs() -> None:
    msgs = conversation(10)
    kept = fit_history(msgs, words, budget=60)
    assert kept[0] == msgs[0] and kept[-1] == msgs[-1]
    assert kept[1].role == "user"  # never starts with an orphaned answer
    assert kept[1:] == msgs[len(msgs) - len(kept) + 1 :]  # a contiguous newest tail
    total = sum(words(m.content) + PER_MESSAGE_OVERHEAD for m in kept)
    assert total <= 60
    assert len(fit_history(msgs, words, budget=10_000)) == len(msgs)


def test_overlong_last_message_is_shortened_from_the_start() -> None:
    msgs = [ChatMessage("system", "s"), ChatMessage("user", "blah " * 500 + "the real question?")]
    kept = fit_history(msgs, words, budget=40)
    assert [m.role for m in kept] == ["system", "user"]
    assert kept[-1].content.endswith("the real question?")
    assert words(kept[-1].content) <= 40
    with pytest.raises(InvalidInputError):
        fit_history([], words, 10)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30), st.integers(30, 400))
def test_history_stays_within_budget(turns: int, budget: int) -> None:
    kept = fit_history(conversation(turns), approx_tokens, budget)
    assert sum(approx_tokens(m.content) + PER_MESSAGE_OVERHEAD for m in kept) <= budget
    assert kept[-1].role == "user"


@pytest.mark.parametrize(
    ("deltas", "stops", "expected"),
    [
        (["Hello", " wor", "ld", "!"], ["world"], "Hello "),
        (["User", ":", " hi"], ["User:"], ""),
        (["a", "b", "c"], ["bd"], "abc"),  # held "b" released when it turns out harmless
        (["a<", "|im", "_end|>b"], ["<|im_end|>"], "a"),
        (["plain", " text"], [], "plain text"),
    ],
)
def test_stop_filter(deltas: list[str], stops: list[str], expected: str) -> None:
    f = StopFilter(stops)
    out = "".join(f.feed(d) for d in deltas) + f.flush()
    assert out == expected


async def test_until_stop_closes_the_stream_it_reads_at_the_stop_string() -> None:
    """The engines apply stop strings outside their decode loop: the loop must still end at
    the stop string (its stream closed), not run on to max_new_tokens."""
    read: list[str] = []
    closed = asyncio.Event()

    async def deltas() -> AsyncGenerator[str, None]:
        try:
            for d in ["Hello", " there", ", how", " ca", "n", " I", " help"]:
                read.append(d)
                yield d
        finally:
            closed.set()

    out = [text async for text in until_stop(deltas(), [" can"])]
    assert "".join(out) == "Hello there, how" and closed.is_set()
    assert read == ["Hello", " there", ", how", " ca", "n"]


def test_personas_say_who_they_are() -> None:
    for name in PERSONAS:
        prompt = system_prompt(name, "Nova")
        assert "Nova" in prompt and "rtc-avatar" in prompt and "not made by OpenAI" in prompt
    with pytest.raises(InvalidInputError):
        system_prompt("pirate")


MSGS = [ChatMessage("user", "What are your opening hours?")]


async def collect(llm: ResilientLLM, messages: list[ChatMessage] = MSGS) -> list[str]:
    return [d async for d in llm.stream(messages, max_new_tokens=10)]


async def test_fast_answer_passes_through_untouched() -> None:
    out = await collect(ResilientLLM(ScriptedLLM(["Hi", " there."]), first_token_deadline_s=1.0))
    assert out == ["Hi", " there."] and not any(isinstance(d, Notice) for d in out)


async def test_holding_phrase_after_the_deadline_then_the_answer() -> None:
    llm = ResilientLLM(ScriptedLLM(["Late", " answer."], delay=0.3), first_token_deadline_s=0.05,
                       holding_phrase="One moment.")
    out = await collect(llm)
    assert out == ["One moment. ", "Late", " answer."]
    assert isinstance(out[0], Notice) and out[0].kind == "holding"


async def test_no_answer_by_the_deadline_is_an_apology_and_stops_the_engine() -> None:
    inner = ScriptedLLM(["Too", " late."], delay=5.0)
    llm = ResilientLLM(inner, first_token_deadline_s=0.02, answer_deadline_s=0.1,
                       holding_phrase="One moment.", apology="Sorry.")
    out = await collect(llm)
    assert [(type(d), d.kind) for d in out if isinstance(d, Notice)] == [
        (Notice, "holding"), (Notice, "apology")]
    assert inner.closed.is_set() and not inner.finished


async def test_a_stall_mid_answer_ends_it_where_it_is() -> None:
    inner = ScriptedLLM(["Part", " one", " never"], gap=1.0)
    llm = ResilientLLM(inner, stall_timeout_s=0.1)
    assert await collect(llm) == ["Part"]
    assert inner.closed.is_set()


async def test_failure_before_any_text_gives_the_apology() -> None:
    llm = ResilientLLM(ScriptedLLM([], error=LLMError("boom")), apology="Sorry about that")
    out = await collect(llm)
    assert out == ["Sorry about that "] and isinstance(out[0], Notice) and out[0].kind == "apology"
    # An empty answer is silence too.
    assert await collect(ResilientLLM(ScriptedLLM([]), apology="Sorry.")) == ["Sorry. "]


async def test_failure_after_text_ends_the_answer_quietly() -> None:
    out = await collect(ResilientLLM(ScriptedLLM(["Part", " one"], error=LLMError("boom"))))
    assert out == ["Part", " one"]


async def test_leaving_the_loop_reaches_the_inner_engine() -> None:
    inner = ScriptedLLM(["a"] * 100, gap=0.01)
    llm = ResilientLLM(inner, first_token_deadline_s=5)
    got = []
    stream = llm.stream(MSGS, max_new_tokens=10)
    async for d in stream:
        got.append(d)
        if len(got) == 3:
            break
    await stream.aclose()
    assert len(got) == 3 and inner.closed.is_set()


async def test_cancelling_the_consumer_reaches_the_inner_engine() -> None:
    inner = ScriptedLLM(["a"] * 100, delay=10.0)
    llm = ResilientLLM(inner, first_token_deadline_s=5)
    task = asyncio.ensure_future(collect(llm))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner.closed.is_set()


async def test_answer_cache_answers_without_the_llm(tmp_path: Path) -> None:
    path = tmp_path / "faq.json"
    path.write_text(json.dumps([
        {"questions": ["What are your opening hours?", "When are you open?"],
         "answer": "We are open nine to five, Monday to Friday."},
        {"question": "How do I reset my PIN?", "answer": "In the app, under Cards."},
    ]))
    inner = ScriptedLLM(["from", " the", " model"])
    llm = ResilientLLM(inner, answer_cache=AnswerCache.load(path))
    out = await collect(llm)
    assert out == ["We are open nine to five, Monday to Friday. "]
    assert isinstance(out[0], Notice) and out[0].kind == "cached" and not inner.calls
    cache = AnswerCache.load(path)
    assert cache.match("when are you open") is not None  # case and punctuation do not matter
    assert cache.match("how do i reset my pin") == "In the app, under Cards."
    assert cache.match("What is the weather like on Mars?") is None
    out = await collect(llm, [ChatMessage("user", "Tell me a joke")])
    assert "".join(out) == "from the model" and len(inner.calls) == 1


def test_answer_cache_rejects_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelLoadError):
        AnswerCache.load(bad)
    bad.write_text(json.dumps([{"question": "q"}]))
    with pytest.raises(ModelLoadError):
        AnswerCache.load(bad)


class PerQuestion:
    """Fake ChatLLM shared by sessions: "stall" never answers, anything else answers."""

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        if messages[-1].content == "stall":
            await asyncio.Event().wait()
        for word in ("Fine", " thanks."):
            yield word
            await asyncio.sleep(0)

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        pass

    def close(self) -> None:
        pass


async def test_a_stalled_generation_degrades_only_its_own_turn() -> None:
    llm = ResilientLLM(PerQuestion(), first_token_deadline_s=0.05, answer_deadline_s=0.2,
                       holding_phrase="One moment.", apology="Sorry.")
    stalled, other = await asyncio.gather(
        collect(llm, [ChatMessage("user", "stall")]),
        collect(llm, [ChatMessage("user", "How are you?")]),
    )
    assert [getattr(d, "kind", None) for d in stalled] == ["holding", "apology"]
    assert other == ["Fine", " thanks."]
