"""The agent's tools run in the embedding app: the Pipecat JS SDK example (`web_client/embed/`)
in headless Chromium, its demo bank handlers registered with `registerFunctionCallHandler`,
against the bank agent on the real model (greedy, so each phrasing gets the same answer).

Questions are typed (`send-text`), so the ASR plays no part: what is tested is the flow of a
call from the model's answer through the server to the page's handler and back.
(a) a lookup runs at once: the handler is called once, `llm-function-call-stopped` comes back
    not cancelled, the agent speaks, and the model read the handler's data;
(b) a card freeze (`confirm = true`) is read back and nothing runs until the user's "Yes.",
    then it runs once, with the card the user named;
(c) "No." to the read-back: the handler is never called;
and the page's saved payees reach the session's hearing (`sendClientRequest("vocabulary")`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rtc_server.app import Server
from rtc_server.engine_set import Engines
from rtc_server.events import Event, ToolCallEvent
from rtc_server.session import Session
from testkit.browser import EMBED_DIR, static_site
from tests.support.server import running_server
from tests.support.tool_engines import bank_config, bank_engines  # noqa: F401 (the fixture)
from tests.test_pipecat_clients import (
    browser,
    embed_config,
    need_embed_bundle,
    rtvi_messages,
    wait_for,
)

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = [pytest.mark.webrtc, pytest.mark.browser]

ANSWER_S = 300  # generous: on a loaded 2-core machine an answer can take minutes
FREEZE = "Please freeze my card ending 4821."


@dataclass
class Bank:
    """A connected embed page and the server's side of its session."""

    page: Page
    session: Session
    events: list[ToolCallEvent]  # the session's `tool_call` events (RTVI drops read-backs)

    async def ask(self, text: str, turn_id: int) -> None:
        """Type `text` in the page's form; return once the answer's turn `turn_id` is over:
        its second `metrics` (the first comes as the voice starts, the complete set once the
        exchange is in the history)."""
        await self.page.fill("#question", text)
        await self.page.click("#ask button")
        await wait_for(self.page, "msgs.filter(m => m.type === 'metrics' && m.data.rtc_avatar "
                                  f"&& m.data.rtc_avatar.turn_id === {turn_id}).length >= 2",
                       ANSWER_S)

    async def handled(self) -> list[dict[str, Any]]:
        """The calls the page's demo handlers ran: [{name, arguments}]."""
        calls: list[dict[str, Any]] = await self.page.evaluate("window.avatar.toolCalls")
        return calls

    def statuses(self) -> list[tuple[str, str]]:
        return [(e.name, e.status) for e in self.events]

    async def freeze_read_back(self) -> None:
        """Ask for the card freeze: it is read back (turn 1) and nothing runs."""
        await self.ask(FREEZE, 1)
        assert self.statuses() == [("freeze_card", "confirm")]
        assert self.events[0].arguments == {"card_last4": "4821"}
        assert await self.handled() == []  # the read-back was spoken; nothing ran
        assert not await rtvi_messages(self.page, "llm-function-call-in-progress")


@asynccontextmanager
async def bank_page(tmp_path: Path, engines: Engines) -> AsyncIterator[Bank]:
    """The embed page connected to the bank agent, its microphone silent."""
    need_embed_bundle()
    async with (
        browser(tmp_path, None) as page,
        static_site(EMBED_DIR) as origin,
        running_server(embed_config(bank_config(), origin), engines) as (server, url),
    ):
        session = await connect(page, f"{origin}/index.html?server={url}", server)
        yield Bank(page, session, recorded_tool_calls(session))


async def connect(page: Page, address: str, server: Server) -> Session:
    """Open the page at `address`, press Connect, wait for `bot-ready`: its server session."""
    await page.goto(address)
    await page.click("#connect")
    await page.wait_for_function("document.getElementById('status').textContent === 'ready'",
                                 timeout=20000)
    session = next(iter(server.registry))
    assert isinstance(session, Session)
    return session


def recorded_tool_calls(session: Session) -> list[ToolCallEvent]:
    """The session's `tool_call` events from now on (its `emit` wrapped, still sending)."""
    calls: list[ToolCallEvent] = []
    emit = session.emit

    def recording(event: Event) -> None:
        if isinstance(event, ToolCallEvent):
            calls.append(event)
        emit(event)

    session.emit = recording  # type: ignore[method-assign]
    return calls


async def test_a_lookup_runs_in_the_page_and_the_agent_answers_from_its_result(
    tmp_path: Path, bank_engines: Engines  # noqa: F811 (the fixture, imported)
) -> None:
    async with bank_page(tmp_path, bank_engines) as bank:
        # the page sent its saved payees as the session's vocabulary on bot-ready
        assert await bank.page.evaluate("window.avatar.vocabulary") == {"words": 4, "used": True}
        prompt = bank.session.behaviour._hearing._prompt  # type: ignore[attr-defined]  # noqa: SLF001
        assert prompt is not None and "David Okafor" in prompt
        await bank.ask("Show me my last three payments.", 1)
        calls = await bank.handled()
        assert [c["name"] for c in calls] == ["recent_payments"], calls
        assert calls[0]["arguments"].get("count", 3) == 3, calls
        stopped = await rtvi_messages(bank.page, "llm-function-call-stopped")
        assert [(m["data"]["function_name"], m["data"]["cancelled"]) for m in stopped] == [
            ("recent_payments", False)], stopped
        assert bank.statuses() == [("recent_payments", "running"),
                                   ("recent_payments", "done")]
        spoke = [m["_t"] for m in await rtvi_messages(bank.page, "bot-stopped-speaking")]
        assert any(t > stopped[0]["_t"] for t in spoke)  # it spoke after the result came
        history = bank.session.behaviour.history  # type: ignore[attr-defined]
        results = [m.content for m in history
                   if m.role == "user" and m.content.startswith("<tool_response>")]
        assert len(results) == 1, history
        # the page's demo data, three payments of its five
        assert all(shop in results[0] for shop in ("Tesco", "Pret A Manger", "Trainline"))
        assert "Boots" not in results[0]
        assert history[-1].role == "assistant" and history[-1].content


@pytest.mark.parametrize(("answer", "runs"), [("Yes.", True), ("No.", False)])
async def test_a_card_freeze_is_read_back_and_runs_only_after_yes(
    tmp_path: Path, bank_engines: Engines,  # noqa: F811 (the fixture, imported)
    answer: str, runs: bool,
) -> None:
    async with bank_page(tmp_path, bank_engines) as bank:
        await bank.freeze_read_back()
        await bank.ask(answer, 2)
        after = ("running", "done") if runs else ("cancelled",)
        assert bank.statuses() == [("freeze_card", s) for s in ("confirm", *after)]
        ran = [{"name": "freeze_card", "arguments": {"card_last4": "4821"}}] if runs else []
        assert await bank.handled() == ran
        sent = await rtvi_messages(bank.page, "llm-function-call-in-progress")
        assert len(sent) == len(ran)
        stopped = await rtvi_messages(bank.page, "llm-function-call-stopped")
        assert [m["data"]["cancelled"] for m in stopped] == [False] * len(ran)
