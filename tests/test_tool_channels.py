"""Where tool calls run: the embedding app over RTVI (Pipecat's function-call messages, on
the fake data channel of the turn-taking rig) and an HTTP service (a real aiohttp server on
127.0.0.1): results, refusals of unknown call ids, bad answers, timeouts, secrets, cuts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from engines.llm.tool_calls import ToolCallsLLM
from engines.tools import ToolCall, ToolSet
from rtc_server.events import ToolCallEvent
from rtc_server.rtvi import messages as rtvi
from rtc_server.tool_runner import CUT_MARK, ToolRunner
from tests.support.fakes import FakeChannel, use_level_detector
from tests.support.turns import REPLY, Harness, speech_duration
from tests.test_rtvi import of, rig, send
from tests.test_tool_turns import BANK, Scripts, call_text


@pytest.fixture
async def h(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    use_level_detector(monkeypatch)
    harness = Harness(tools=ToolSet.load(BANK))
    try:
        yield harness
    finally:
        await harness.close()


async def asked(h: Harness, call: list[str], version: str, question: str, kind: str
                ) -> tuple[FakeChannel, dict[str, Any]]:
    """An RTVI client of `version` asks `question`; the model writes `call`: what the client
    is asked to run (the `kind` message's data)."""
    h.engines.llm = ToolCallsLLM(Scripts(call))
    _, channel = rig(h)
    send(channel, "client-ready", {"version": version})
    send(channel, "send-text", {"content": question}, "m2")
    for _ in range(100):
        await h.listen(0.02)
        if of(channel, kind):
            break
    return channel, of(channel, kind)[0]["data"]


async def test_the_rtvi_client_runs_the_call_and_its_result_is_answered(h: Harness) -> None:
    channel, call = await asked(h, call_text("recent_payments", count=2), "2.1.0",
                                "Show me my last two payments.", "llm-function-call-in-progress")
    assert call["function_name"] == "recent_payments" and call["arguments"] == {"count": 2}
    assert of(channel, "llm-function-call-started")[0]["data"] == {
        "function_name": "recent_payments"}
    send(channel, "llm-function-call-result", {"unknown": 1}, "m3")  # no tool_call_id
    send(channel, "llm-function-call-result", {
        "function_name": "recent_payments", "tool_call_id": "call_nope", "arguments": {},
        "result": {}}, "m4")
    errors = {m["id"]: m["data"]["error"] for m in of(channel, "error-response")}
    assert "tool_call_id" in errors["m3"] and "no tool call 'call_nope'" in errors["m4"]
    send(channel, "llm-function-call-result", {
        "function_name": "recent_payments", "tool_call_id": call["tool_call_id"],
        "arguments": {"count": 2}, "result": {"payments": ["a", "b"]}}, "m5")
    await h.listen(speech_duration(REPLY) + 2.0)
    stopped = of(channel, "llm-function-call-stopped")[0]["data"]
    assert stopped["tool_call_id"] == call["tool_call_id"] and stopped["cancelled"] is False
    assert json.loads(stopped["result"]) == {"payments": ["a", "b"]}
    send(channel, "llm-function-call-result", {  # the same result again: answered already
        "function_name": "recent_payments", "tool_call_id": call["tool_call_id"],
        "arguments": {}, "result": {}}, "m6")
    assert "m6" in {m["id"] for m in of(channel, "error-response")}
    assert h.agent.history[-1].role == "assistant"


async def test_a_protocol_1_client_gets_the_deprecated_message(h: Harness) -> None:
    channel, data = await asked(h, call_text("account_balance"), "1.0.0", "What's my balance?",
                                "llm-function-call")
    assert data["function_name"] == "account_balance" and data["args"] == {}
    assert not of(channel, "llm-function-call-in-progress")


def test_a_call_read_back_or_refused_sends_no_stopped() -> None:
    t = rtvi.Translator(user_id="u")
    assert t.translate(ToolCallEvent(1, "c1", "freeze_card", "confirm")) == []
    assert t.translate(ToolCallEvent(1, "c1", "freeze_card", "cancelled")) == []
    assert [m["type"] for m in t.translate(ToolCallEvent(1, "c2", "x", "running"))] == [
        "llm-function-call-started"]
    stopped = t.translate(ToolCallEvent(1, "c2", "x", "timeout"))[0]
    assert stopped["data"] == {"tool_call_id": "c2", "function_name": "x", "cancelled": True}


# --- HTTP -------------------------------------------------------------------------------------

def http_tools(url: str, **extra: Any) -> ToolSet:
    return ToolSet.from_dict({"max_result_chars": 40, "tool": [{
        "name": "branch_queue", "description": "How long the queue is at a branch.",
        "runs": "http", "url": url, "timeout_s": 1.0, **extra,
        "parameters": {"type": "object", "properties": {"branch": {"type": "string"}}}}]})


async def service(handler: Any) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/tool", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
    try:
        yield f"http://127.0.0.1:{port}/tool"
    finally:
        await runner.cleanup()


async def run_http(handler: Any, **extra: Any) -> Any:
    async for url in service(handler):
        tools = http_tools(url, **extra)
        runner = ToolRunner(tools, lambda: None)
        try:
            return await runner.run(ToolCall("branch_queue", {"branch": "Leeds"}, "call_1"),
                                    tools.tools[0])
        finally:
            await runner.aclose()


async def test_an_http_tool_gets_the_call_and_its_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        seen["body"] = await request.json()
        seen["secret"] = request.headers.get("X-Bank-Key")
        return web.json_response({"minutes": 7})

    monkeypatch.setenv("BANK_TOOL_KEY", "s3cret")
    outcome = await run_http(handler, secret_env="BANK_TOOL_KEY", secret_header="X-Bank-Key")
    assert outcome.status == "done" and json.loads(outcome.result) == {"minutes": 7}
    assert seen == {"body": {"name": "branch_queue", "arguments": {"branch": "Leeds"},
                             "call_id": "call_1"}, "secret": "s3cret"}


async def test_a_missing_secret_fails_without_calling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BANK_TOOL_KEY", raising=False)
    called = []

    async def handler(request: web.Request) -> web.Response:
        called.append(1)
        return web.json_response({})

    outcome = await run_http(handler, secret_env="BANK_TOOL_KEY")
    assert outcome.status == "failed" and "secret" in outcome.reason and not called


@pytest.mark.parametrize(("reply", "reason"), [
    (lambda: web.Response(text="<html>oops</html>"), "not readable"),
    (lambda: web.json_response({"e": 1}, status=500), "error (500)"),
    (lambda: web.Response(body=b"[" + b"1," * 600_000 + b"1]"), "too large"),
])
async def test_bad_http_answers_fail_the_call_plainly(reply: Any, reason: str) -> None:
    async def handler(request: web.Request) -> web.Response:
        return reply()

    outcome = await run_http(handler)
    assert outcome.status == "failed" and reason in outcome.reason


async def test_a_long_result_is_cut_and_a_slow_service_times_out() -> None:
    async def long(request: web.Request) -> web.Response:
        return web.json_response({"text": "x" * 500})

    outcome = await run_http(long)
    assert outcome.status == "done" and outcome.result.endswith(CUT_MARK)
    assert len(outcome.result) == 40 + len(CUT_MARK)

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(3)
        return web.json_response({})

    outcome = await run_http(slow)
    assert outcome.status == "timeout" and 0.9 < outcome.duration_s < 2.5


async def test_an_unreachable_service_fails_the_call() -> None:
    tools = http_tools("http://127.0.0.1:9/tool")  # discard port: nothing listens
    runner = ToolRunner(tools, lambda: None)
    try:
        outcome = await runner.run(ToolCall("branch_queue", {}), tools.tools[0])
    finally:
        await runner.aclose()
    assert outcome.status == "failed" and "could not be reached" in outcome.reason


def test_a_file_path_names_an_http_tool_without_its_secret(tmp_path: Path) -> None:
    tools = http_tools("https://bank.example/tool", secret_env="BANK_TOOL_KEY")
    assert tools.tools[0].secret_env == "BANK_TOOL_KEY"
    assert "s3cret" not in repr(tools)
