"""OpenAI-compatible HTTP engine against local SSE test servers on 127.0.0.1: a good one, one
that stalls, one that errors (retried), one that rejects; plus cancellation and stop strings."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from engines.llm import ChatMessage, LLMConfig, create_llm
from engines.llm.errors import LLMError, LLMTimeoutError
from engines.llm.openai_http import OpenAIChatLLM
from engines.llm.prompt import PromptBuilder

WORDS = ["Hello", " there", ",", " how", " can", " I", " help", "?"]


class Server:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # path and JSON body of each request
        self.failures_left = 0  # /flaky answers 503 this many times first
        self.release = threading.Event()  # lets stalled handlers finish
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body,
                                        "auth": self.headers.get("Authorization")})
                mode = self.path.split("/")[1]
                if mode == "flaky" and server.failures_left > 0:
                    server.failures_left -= 1
                    self._plain(503, "busy")
                    return
                if mode == "bad":
                    self._plain(400, "bad request")
                    return
                if mode == "silent":  # accepts, then never answers
                    server.release.wait(10)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b": keep-alive comment\n\n")
                for i, word in enumerate(WORDS):
                    if mode == "stall" and i == 3:
                        self.wfile.flush()
                        server.release.wait(10)
                        return
                    if mode == "slow":
                        time.sleep(0.05)
                    event = {"choices": [{"index": 0, "delta": {"content": word}}]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

            def _plain(self, status: int, text: str) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text.encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"


@pytest.fixture()
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.release.set()
    s.httpd.shutdown()
    s.httpd.server_close()


async def ask(llm: OpenAIChatLLM, **kwargs: Any) -> str:
    deltas = llm.stream([ChatMessage("user", "hi")], max_new_tokens=20, **kwargs)
    return "".join([d async for d in deltas])


def engine(url: str, **kwargs: Any) -> OpenAIChatLLM:
    return OpenAIChatLLM(url, prompt=PromptBuilder("Be brief."), **kwargs)


async def test_streams_deltas_and_sends_the_protocol(server: Server) -> None:
    llm = engine(server.url("ok"), model="m1", api_key="k")
    deltas = [d async for d in llm.stream([ChatMessage("user", "hi")], max_new_tokens=20)]
    assert deltas == WORDS
    req = server.requests[0]
    assert req["path"] == "/ok/v1/chat/completions" and req["auth"] == "Bearer k"
    body = req["body"]
    assert isinstance(body, dict)
    assert body["stream"] is True and body["model"] == "m1" and body["max_tokens"] == 20
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
    ]


async def test_stop_strings_are_enforced_client_side(server: Server) -> None:
    llm = engine(server.url("ok"))
    assert await ask(llm, stop=[" can"]) == "Hello there, how"
    assert server.requests[0]["body"]["stop"] == [" can"]


async def test_an_answer_stops_where_it_runs_into_a_worked_example(server: Server) -> None:
    """The persona's example opener is a stop string of every engine (`PromptBuilder.stops`):
    a small model that runs on past its answer into another example is cut there."""
    llm = OpenAIChatLLM(server.url("ok"), prompt=PromptBuilder("Be brief.", stops=(" how",)))
    assert await ask(llm) == "Hello there,"
    assert server.requests[0]["body"]["stop"] == [" how"]
    assert PromptBuilder.for_persona("bank", language="zh").stops == ("（FACTS 写的是：",)
    assert PromptBuilder.for_persona("bank").stops == ("(The FACTS say",)
    assert PromptBuilder.for_persona("companion").stops == ()  # no examples, no stop


async def test_errors_before_first_token_are_retried(server: Server) -> None:
    server.failures_left = 2
    llm = engine(server.url("flaky"), retries=2)
    assert await ask(llm) == "".join(WORDS)
    assert len(server.requests) == 3


async def test_error_server_fails_after_retries(server: Server) -> None:
    server.failures_left = 100
    llm = engine(server.url("flaky"), retries=1)
    with pytest.raises(LLMError, match="503"):
        await ask(llm)
    assert len(server.requests) == 2


async def test_client_errors_are_not_retried(server: Server) -> None:
    with pytest.raises(LLMError, match="400"):
        await ask(engine(server.url("bad"), retries=3))
    assert len(server.requests) == 1


async def test_stall_mid_stream_times_out_without_retry(server: Server) -> None:
    llm = engine(server.url("stall"), read_timeout_s=0.4, retries=3)
    got: list[str] = []
    with pytest.raises(LLMTimeoutError):
        async for delta in llm.stream([ChatMessage("user", "hi")], max_new_tokens=20):
            got.append(delta)
    assert got == WORDS[:3]  # what arrived before the stall was delivered
    assert len(server.requests) == 1  # no retry after text was spoken


async def test_silent_server_times_out_after_retries(server: Server) -> None:
    llm = engine(server.url("silent"), read_timeout_s=0.3, connect_timeout_s=0.3, retries=1)
    with pytest.raises(LLMTimeoutError):
        await ask(llm)
    assert len(server.requests) == 2


async def test_unreachable_server_fails_with_a_connection_error() -> None:
    llm = engine("http://127.0.0.1:9/v1", retries=1, connect_timeout_s=0.5)
    with pytest.raises(LLMError, match="connection"):
        await ask(llm)


async def test_cancelling_a_stalled_stream_closes_the_connection(server: Server) -> None:
    llm = engine(server.url("stall"), read_timeout_s=30)
    got: list[str] = []

    async def consume() -> None:
        async for delta in llm.stream([ChatMessage("user", "hi")], max_new_tokens=20):
            got.append(delta)

    task = asyncio.ensure_future(consume())
    while len(got) < 3:  # noqa: ASYNC110 - observing the consumer task
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # returns although the server would stay silent for 10 s
    assert got == WORDS[:3]


async def test_closing_the_iterator_mid_stream(server: Server) -> None:
    llm = engine(server.url("slow"))
    stream = llm.stream([ChatMessage("user", "hi")], max_new_tokens=20)
    assert await anext(stream) == "Hello"
    await stream.aclose()  # must not hang or raise


async def test_factory_builds_the_http_engine_with_persona(server: Server) -> None:
    llm = create_llm(LLMConfig(engine="openai", base_url=server.url("ok"), persona="bank"))
    deltas = llm.stream([ChatMessage("user", "hi")], max_new_tokens=5)
    assert "".join([d async for d in deltas]) == "".join(WORDS)
    system = server.requests[0]["body"]["messages"][0]
    assert system["role"] == "system" and "bank" in system["content"]
    assert "rtc-avatar" in system["content"] and "0800 123 4568" in system["content"]
