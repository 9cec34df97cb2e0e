"""No invented figures: an answer may only state numbers the facts or the conversation hold.

A small model asked about a fee its facts do not list will often make one up ("a safe deposit
box costs between £100 and £500"). For a bank that is worse than no answer, so `GroundedLLM`
watches the stream: text is passed on at once, except from the first digit of a figure until
the figure ends (a few tokens). A figure (a phone number, an amount, a rate, a time) that is
neither in the deployment's facts nor anywhere in the conversation so far stops the answer
there; the persona's "I don't have that information" line (a `Notice` of kind "unknown")
replaces the rest. Times also match in their short and 12-hour forms ("13:00" allows "13"
and "1"), amounts without thousands separators ("10,000" allows "10000").

A known figure quoted with a unit of time or money must have that unit where it is known:
"2 to 3 working days" for a cheque is stopped, as the facts' 2 is "2 hours" (3 is known as
"1 to 3 working days"); "£5" and "5 pounds" are the same; a figure the facts state without a
unit ("18 or older") may take one ("18 years"). The text after a figure is held until its
unit is known (a few tokens).

It cannot tell a known figure used for the wrong thing with the right unit (the unarranged
overdraft's 39.9% quoted for an arranged one); the prompt's rules and examples are the
defence there.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence

from engines.llm.base import ChatLLM, ChatMessage, LLMWrapper, close_stream
from engines.llm.resilience import Notice

# Digit groups joined by single spaces are one figure (phone numbers: "0800 123 4567").
_FIGURE = re.compile(r"\d(?:[\d,.:]*\d)?(?: \d(?:[\d,.:]*\d)?)*")
_TIME = re.compile(r"(\d{1,2}):(\d{2})")
_NUM = r"\d(?:[\d,.]*\d)?"
_RANGE = r"\s*(?:to|or|and|-|–)\s*"  # "2 to 3", "2-3": one unit for both ends
_UNITS = (r"(working days?|business days?|days?|hours?|minutes?|weeks?|months?|years?|"
          r"pounds?|pence|dollars?|euros?|percent|%)")
# "2 to 3 working days", "24-hour", "10,000 pounds", "2.75%": the unit applies to both ends.
_WITH_UNIT = re.compile(
    rf"({_NUM})(?:{_RANGE}({_NUM}))?(?:\s+|-)?{_UNITS}(?![a-z])", re.I
)
_CURRENCY = re.compile(rf"([£$€])\s?({_NUM})(?:\s*(?:to|or|-|–)\s*[£$€]?\s?({_NUM}))?")
_SYMBOLS = {"£": "pound", "$": "dollar", "€": "euro"}
# After a figure, text that may still be its unit: a few words, no punctuation.
_UNIT_PENDING = re.compile(rf"{_NUM}(?:{_RANGE}(?:{_NUM})?)?[\s-]*[a-z]*\s*[a-z]*\Z", re.I)


def figures(text: str) -> set[str]:
    """The figures `text` states, in comparable forms (see the module docstring)."""
    found: set[str] = set()
    for raw in _FIGURE.findall(text):
        figure = _canonical(raw.replace(",", "").replace(" ", "").rstrip("."))
        found.add(figure)
        time = _TIME.fullmatch(raw)
        if time is not None:
            hour, minute = int(time.group(1)), time.group(2)
            found.add(str(hour))
            if hour > 12:
                found.add(str(hour - 12))
                found.add(f"{hour - 12}:{minute}")
    return found


def _unit(word: str) -> str:
    word = word.lower()
    if word in ("%", "percent"):
        return "%"
    word = word.removeprefix("working ").removeprefix("business ")
    return word if word == "pence" else word.rstrip("s")


def _number(raw: str) -> str:
    return _canonical(raw.replace(",", "").rstrip("."))


def _canonical(figure: str) -> str:
    """One form per number: "05" is 5 and "23.40" is 23.4 (a date's day; an amount as a
    tool's JSON result writes it), so a figure said either way is the same figure. Longer
    digit runs keep their zeros (a phone number's "0800")."""
    number = re.fullmatch(r"(\d+)(?:\.(\d+))?", figure)
    if number is None:
        return figure
    whole, fraction = number.group(1), (number.group(2) or "").rstrip("0")
    if len(whole) <= 2:
        whole = whole.lstrip("0") or "0"
    return f"{whole}.{fraction}" if fraction else whole


def unit_figures(text: str) -> set[tuple[str, str]]:
    """The (figure, unit) pairs `text` states for units of time and money."""
    found: set[tuple[str, str]] = set()
    for match in _WITH_UNIT.finditer(text):
        unit = _unit(match.group(3))
        found.update((_number(n), unit) for n in match.group(1, 2) if n)
    for match in _CURRENCY.finditer(text):
        unit = _SYMBOLS[match.group(1)]
        found.update((_number(n), unit) for n in match.group(2, 3) if n)
    return found


def _unit_may_follow(text: str) -> bool:
    """The text ends within a figure's possible unit ("2 to", "3 working"): hold it."""
    return bool(_UNIT_PENDING.search(text))


def _figure_may_continue(text: str) -> bool:
    """The text ends inside a figure, or right after one where a next group may follow."""
    return bool(re.search(r"\d[\d,.:]*[,.:]?$|\d \Z", text))


class GroundedLLM(LLMWrapper):
    """A `ChatLLM` that never states a figure it was not given (see the module docstring)."""

    def __init__(self, inner: ChatLLM, facts: str, unknown: str) -> None:
        super().__init__(inner)
        self._known = figures(facts)
        self._known_units = unit_figures(facts)
        self._unknown = unknown.strip() + " "

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncGenerator[str, None]:
        conversation = " ".join(m.content for m in messages)
        allowed = self._known | figures(conversation)
        allowed_units = self._known_units | unit_figures(conversation)
        with_units = {figure for figure, _ in allowed_units}

        def invents(text: str) -> bool:
            if figures(text) - allowed:
                return True
            # A known figure with a unit that is not the one it has where it is known.
            return any(figure in with_units for figure, _ in unit_figures(text) - allowed_units)

        deltas = aiter(self.inner.stream(messages, max_new_tokens=max_new_tokens, stop=stop))
        held = ""
        try:
            async for delta in deltas:
                if isinstance(delta, Notice):  # made up by a wrapper: already safe to say
                    yield delta
                    continue
                held += delta
                if _figure_may_continue(held) or _unit_may_follow(held):
                    continue
                if invents(held):
                    yield Notice(self._unknown, "unknown")
                    return
                out, held = held, ""
                yield out
            if held and invents(held):
                yield Notice(self._unknown, "unknown")
            elif held:
                yield held
        finally:
            await close_stream(deltas)
