"""ProcessLLM: a ChatLLM served from a child process (spawned; fake engines from
tests/support/fake_llm.py, so this runs in seconds)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator

import pytest

from engines.llm.base import ChatMessage
from engines.llm.errors import LLMError, ModelLoadError
from engines.llm.process import ProcessLLM
from engines.llm.resilience import Notice
from tests.support.fake_llm import broken_llm, words_llm


@pytest.fixture(scope="module")
def llm() -> Iterator[ProcessLLM]:
    engine = ProcessLLM(functools.partial(words_llm, 0.01), name="test-llm")
    yield engine
    engine.close()


def ask(llm: ProcessLLM, text: str, **kwargs: object) -> list[str]:
    return list(llm.stream([ChatMessage("user", text)], max_new_tokens=50, **kwargs))  # type: ignore[arg-type]


def test_streams_deltas_and_keeps_notices(llm: ProcessLLM) -> None:
    assert "".join(ask(llm, "one two three")) == "one two three "
    deltas = ask(llm, "notice")
    assert isinstance(deltas[0], Notice) and deltas[0].kind == "holding"


def test_concurrent_streams_get_their_own_answers(llm: ProcessLLM) -> None:
    results: dict[int, str] = {}

    def run(i: int) -> None:
        results[i] = "".join(ask(llm, f"question {i} " + "word " * 5))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {i: f"question {i} " + "word " * 5 for i in range(4)}


def test_cancel_stops_promptly(llm: ProcessLLM) -> None:
    slow = ProcessLLM(functools.partial(words_llm, 0.2), name="slow-llm")
    try:
        cancel = threading.Event()
        got: list[str] = []
        start = time.monotonic()
        for delta in slow.stream([ChatMessage("user", "a b c d e f g h i j")], max_new_tokens=50,
                                 cancel=cancel):
            got.append(delta)
            cancel.set()
        assert got == ["a "] and time.monotonic() - start < 1.0
        # closing the generator early works the same way
        gen = slow.stream([ChatMessage("user", "k l m n o p")], max_new_tokens=50)
        assert next(gen) == "k "
        gen.close()
        assert "".join(ask(slow, "still alive")) == "still alive "
    finally:
        slow.close()


def test_engine_error_reaches_the_caller(llm: ProcessLLM) -> None:
    with pytest.raises(LLMError, match="kaboom"):
        ask(llm, "one boom")
    assert ask(llm, "fine") == ["fine "]


def test_dead_child_fails_the_stream_and_is_restarted(llm: ProcessLLM) -> None:
    with pytest.raises(LLMError, match="exited"):
        ask(llm, "please die now")
    assert ask(llm, "back again") == ["back ", "again "]


def test_load_failure_is_a_model_load_error() -> None:
    with pytest.raises(ModelLoadError, match="no such model"):
        ProcessLLM(broken_llm, name="broken")
