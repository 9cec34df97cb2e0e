"""The agent's tool calls within a conversation: check, read back, run, answer from the result.

One `Acting` per session, owned by the conversation (`rtc_server/agent.py`); it holds the one
piece of state that outlives a turn, the call read back and waiting for the user's yes.

A call the model writes (`engines/llm/tool_calls.py`) is acted on only once its turn is
confirmed (an answer started early on a partial transcript runs nothing), and then as
`engines.tools.check_call` decides:
- not a declared tool: `refused`; the model answers in words instead (a second call is
  answered with the `refused` phrase). A prompt injection in a tool's result or a user asking
  for an undeclared action ends here;
- a value the user did not say, or a required one missing: `asked`, the agent asks for it;
- `confirm = true`: read back (`confirm`), nothing runs; the next user turn decides (`reply`):
  a clear yes runs it, a no cancels it, anything else cancels it and is answered as usual; a
  barge-in that interrupts the read-back cancels it too;
- otherwise it runs, and the model answers from the result; a failure or timeout is said
  plainly. The tools' bridge phrase is said from the moment the model begins a call (the
  conversation does that), a tool's own `bridge` when it runs after a yes.

Never two calls of the same action in one turn, nor more than the tools'
`max_calls_per_turn`: a repeated call is answered in words from what was already done.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

from engines.llm.base import ChatMessage
from engines.text.consent import Consent, consent
from engines.tools.calls import ToolCall, check_call, parse_call, tool_response
from engines.tools.spec import ToolSet, ToolSpec
from rtc_server.events import ToolCallEvent, ToolStatus
from rtc_server.session import Session
from rtc_server.tool_runner import ToolOutcome, ToolRunner
from rtc_server.turn import Turn

# Added to the user's words when the model is to answer without a call (its call was not
# readable, or not a declared tool).
IN_WORDS = "(Answer in words; there is no tool for this.)"


@dataclass(frozen=True)
class FollowUp:
    """The model answers `messages` next (a tool's result, or words instead of a call);
    `tools` False: a call in that answer is not run."""

    messages: list[ChatMessage]
    tools: bool = True


@dataclass(frozen=True)
class Pending:
    """A call read back, waiting for the user's yes."""

    call: ToolCall
    spec: ToolSpec
    turn_id: int


class Acting:
    def __init__(self, tools: ToolSet, runner: ToolRunner, session: Session,
                 language: str = "en") -> None:
        self.tools = tools
        self._language = language
        self.runner = runner
        self._session = session
        self.pending: Pending | None = None
        self._words: tuple[str, ...] = ()  # the user's own (the app's vocabulary)

    # --- what the conversation asks ----------------------------------------------------------

    def reply(self, text: str) -> Consent | None:
        """The user's answer to the read-back (None: nothing is waiting)."""
        return None if self.pending is None else consent(text)

    def use_words(self, words: tuple[str, ...]) -> None:
        """The user's own names (the app's vocabulary): near misses of them in a call's text
        arguments are read back and run as these (engines/tools/calls.py)."""
        self._words = words

    def cancel(self, why: str) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            self._event(pending.turn_id, pending.call, pending.spec, "cancelled", detail=why)

    def tool_result(self, call_id: str, result: Any) -> bool:
        return self.runner.deliver(call_id, result)

    async def aclose(self) -> None:
        self.pending = None
        await self.runner.aclose()

    # --- a call in an answer -----------------------------------------------------------------

    async def on_call(
        self, turn: Turn, raw: str, messages: list[ChatMessage], *, allowed: bool,
        bridged: bool,
    ) -> AsyncGenerator[str | FollowUp, None]:
        """What becomes of the call `raw` the model wrote answering `messages`: text to say,
        then possibly a `FollowUp` for the model."""
        await turn.wait_confirmed()  # an early start acts on nothing
        phrases = self.tools.phrases
        if not allowed:  # asked for words, the model wrote a call again
            yield phrases.done if turn.calls else phrases.refused
            return
        words = _in_words(messages)
        call = parse_call(raw)
        if call is None:  # not readable: words instead
            yield FollowUp(words, tools=False)
            return
        verdict = check_call(self.tools, call, _said(messages), self._words,
                             _request(messages))
        spec = verdict.spec
        if verdict.kind == "refuse" or spec is None:
            self._event(turn.id, call, None, "refused", detail=verdict.reason)
            yield FollowUp(words, tools=False)
            return
        repeated = any(c.same_action(verdict.call) for c in turn.calls)
        if repeated or len(turn.calls) >= self.tools.max_calls_per_turn:
            yield FollowUp(words, tools=False)  # from what was done already
            return
        if verdict.kind == "ask":
            needed = verdict.needed or tuple(spec.parameters.get("required", ()))
            self._event(turn.id, verdict.call, spec, "asked",
                        detail=verdict.reason or f"needs {', '.join(needed)}")
            yield phrases.missing.format(action=spec.title, needed=_needs(spec, needed))
            return
        if verdict.kind == "confirm":
            self.pending = Pending(verdict.call, spec, turn.id)
            self._event(turn.id, verdict.call, spec, "confirm")
            yield read_back(spec, verdict.call, phrases.confirm)
            return
        async for item in self._run(turn, verdict.call, spec, messages, bridged=bridged):
            yield item

    async def run_pending(
        self, turn: Turn, messages: list[ChatMessage]
    ) -> AsyncGenerator[str | FollowUp, None]:
        """The user said yes: run the call read back (once: the pending call is taken)."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        async for item in self._run(turn, pending.call, pending.spec, messages, bridged=False):
            yield item

    async def _run(
        self, turn: Turn, call: ToolCall, spec: ToolSpec, messages: list[ChatMessage], *,
        bridged: bool,
    ) -> AsyncGenerator[str | FollowUp, None]:
        turn.calls.append(call)
        if not bridged:
            yield spec.bridge or self.tools.phrases.bridge
        self._event(turn.id, call, spec, "running")
        try:
            outcome = await self.runner.run(call, spec)
        except asyncio.CancelledError:  # the turn was interrupted while the tool ran
            self._event(turn.id, call, spec, "cancelled", detail="interrupted while running")
            raise
        self._finished(turn.id, call, spec, outcome)
        phrases = self.tools.phrases
        if outcome.status == "timeout":
            yield phrases.timed_out.format(action=spec.title)
            return
        if outcome.status == "failed":
            yield phrases.failed.format(action=spec.title, reason=outcome.reason)
            return
        exchange = [ChatMessage("assistant", call.text()),
                    ChatMessage("user", tool_response(outcome.result, self._language))]
        turn.tool_messages.extend(exchange)
        yield FollowUp([*messages, *exchange])

    # --- events, metrics, logs ---------------------------------------------------------------

    def _finished(self, turn_id: int, call: ToolCall, spec: ToolSpec,
                  outcome: ToolOutcome) -> None:
        self._session.metrics.tool_call_seconds.labels(tool=spec.name).observe(
            outcome.duration_s)
        self._event(turn_id, call, spec, outcome.status,
                    duration_ms=round(outcome.duration_s * 1000, 1),
                    result=outcome.result or None, detail=outcome.reason)

    def _event(self, turn_id: int, call: ToolCall, spec: ToolSpec | None, status: ToolStatus,
               *, duration_ms: float | None = None, result: str | None = None,
               detail: str = "") -> None:
        hidden = spec is not None and spec.sensitive
        session = self._session
        if status not in ("running", "confirm"):
            tool = spec.name if spec is not None else "undeclared"
            session.metrics.tool_calls.labels(tool=tool, outcome=status).inc()
        fields: dict[str, Any] = {"tool": call.name, "call_id": call.id, "status": status}
        if duration_ms is not None:
            fields["duration_ms"] = duration_ms
        if not hidden:
            fields["arguments"] = call.arguments
        if detail:
            fields["detail"] = detail
        session.log.info("tool %s: %s", call.name, status, extra=fields)
        session.emit(ToolCallEvent(
            turn_id=turn_id, call_id=call.id, name=call.name, status=status,
            arguments=None if hidden else dict(call.arguments), duration_ms=duration_ms,
            result=None if hidden else result, detail=detail))


def read_back(spec: ToolSpec, call: ToolCall, generic: str) -> str:
    """The confirmation question: the tool's own `confirm_text`, else the generic one with
    the arguments said one by one."""
    if spec.confirm_text:
        return spec.confirm_text.format_map(_Blank(call.arguments))
    details = ", ".join(f"{k.replace('_', ' ')} {_spoken(v)}" for k, v in call.arguments.items())
    return generic.format(action=spec.title, details=f": {details}" if details else "")


def _spoken(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _Blank(dict[str, Any]):
    """Arguments for a read-back: an optional one not given reads as nothing."""

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        super().__init__({k: _spoken(v) for k, v in arguments.items()})

    def __missing__(self, key: str) -> str:
        return ""


def _needs(spec: ToolSpec, needed: tuple[str, ...]) -> str:
    properties = spec.parameters.get("properties", {})
    named = [str(properties.get(n, {}).get("description") or n.replace("_", " "))
             for n in needed]
    return " and ".join(named) if named else "a little more detail"


def _users(messages: list[ChatMessage]) -> list[str]:
    """The user's words of each request (not the tool results the history holds as theirs)."""
    return [m.content for m in messages if m.role == "user" and not m.content.startswith("<")]


def _said(messages: list[ChatMessage]) -> str:
    """The user's words of this request and the one before (an answer to "which card?")."""
    return " ".join(_users(messages)[-2:])


def _request(messages: list[ChatMessage]) -> str:
    """The user's words of this request alone."""
    return (_users(messages) or [""])[-1]


def _in_words(messages: list[ChatMessage]) -> list[ChatMessage]:
    last = messages[-1]
    return [*messages[:-1], ChatMessage(last.role, f"{last.content}\n{IN_WORDS}")]
