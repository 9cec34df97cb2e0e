"""A tool call read out of the model's answer, and the checks before anything happens.

The model writes a call in its chat template's format (`<tool_call>{"name": ..., "arguments":
{...}}</tool_call>`); the 1.5B also writes the bare JSON object, Qwen's prompt quirk `{{...}}`
copied, or the call inside the declarations' `<tools>` tags. `parse_call` reads them all.

`check_call` decides what becomes of a call, whatever the model meant:
- `refuse`: the name is not declared (a prompt injection or a user asking for an action this
  deployment does not have), or the user's request only thanked or said goodbye, or asked
  how something is done (`engines/text/requests.py`): nothing runs, the model answers in
  words;
- `ask`: a required argument is missing, fails its schema, or holds a value the user never
  said ("How do I freeze my card?" answered with a call on card 1234): the agent asks for it
  instead of acting on an invented value; an optional argument the user never said is dropped;
- `confirm`: valid, and the tool moves money or changes an account: read back first;
- `run`: valid: run it.

"Said" means in the user's words of this request or the one before (the answer to "which
card?"): numbers are compared as numbers (words turned to digits first: "three" is 3, "ten am"
holds 10), text by fuzzy match. A value from a closed set (`enum`) or a yes/no is the model's
to choose.

The user's own words (the app's `vocabulary`: their saved payees' names) mend a text value
the ASR got nearly right: "David Okafa" becomes the saved "David Okafor" when it is that
close to one name (`_SNAP_SCORE`) and no nearer another's, so the read-back names the payee
the app knows, and the user's yes or no is to that.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engines.tools.spec import ToolSet, ToolSpec

# The template's tags, or the declarations' `<tools>` tags the model copied instead.
_CALL_TAG = re.compile(r"<(tool_call|tools)>\s*(.*?)\s*(?:</\1>|$)", re.S)
_DIGITS = re.compile(r"\d+")
_MIN_TEXT_MATCH = 80  # rapidfuzz partial_ratio for a text value to count as said
# rapidfuzz ratio (case and punctuation ignored) from which a text value is taken for one of the
# user's own words: "David Okafa" / "David Okafor" 87, "Jamie Clarke" / "Jamie Clark" 96; "Tom
# Baker" / "Tom Parker" 84 (two people: not mended); the best must lead the next by `_SNAP_LEAD`.
_SNAP_SCORE = 85.0
_SNAP_LEAD = 5.0


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:16]}")

    def text(self) -> str:
        """The call as the chat template writes it (what the history keeps)."""
        body = json.dumps({"name": self.name, "arguments": self.arguments}, ensure_ascii=False)
        return f"<tool_call>\n{body}\n</tool_call>"

    def same_action(self, other: ToolCall) -> bool:
        return self.name == other.name and self.arguments == other.arguments


def parse_call(text: str) -> ToolCall | None:
    """The first call in `text` (the start of a model's answer), or None if it holds none."""
    text = text.strip()
    tagged = _CALL_TAG.search(text)
    body = tagged.group(2) if tagged else text
    body = body.strip()
    while body.startswith("{{"):  # Qwen's template quirk, copied by the model
        body = body[1:]
    obj = _first_object(body)
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # some templates write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(obj["name"], arguments)


def _first_object(text: str) -> Any:
    """The first JSON value of `text`, whatever follows it (a second call, stray braces)."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return None
    return value


Kind = Literal["run", "confirm", "ask", "refuse"]


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    call: ToolCall  # with unsaid optional arguments dropped
    spec: ToolSpec | None = None
    needed: tuple[str, ...] = ()  # for `ask`: the parameters to ask for
    reason: str = ""


def check_call(tools: ToolSet, call: ToolCall, said: str,
               words: tuple[str, ...] = (), request: str = "") -> Verdict:
    """What to do with `call`, given the user's words `said` (this request and the one
    before), their own `words` (the app's vocabulary) and this `request` alone (see the
    module docstring)."""
    from jsonschema import Draft202012Validator

    from engines.text.requests import is_closing, is_how_to

    spec = tools.get(call.name)
    if spec is None:
        return Verdict("refuse", call, reason=f"{call.name!r} is not a declared tool")
    if request and is_closing(request):
        return Verdict("refuse", call, reason="the user only said thanks or goodbye")
    if request and is_how_to(request):
        return Verdict("refuse", call, reason="the user asked how something is done")
    schema = spec.parameters
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    numbers = _numbers(said)
    kept: dict[str, Any] = {}
    needed: list[str] = []
    for key, value in call.arguments.items():
        prop = properties.get(key)
        if prop is None:
            continue  # not a parameter: dropped (additional properties are the model's)
        value = _repaired(value, prop)
        ok = not list(Draft202012Validator(prop).iter_errors(value)) and _said(
            value, prop, said, numbers)
        if ok:
            kept[key] = _snapped(_afternoon(value, said), words) if isinstance(
                value, str) else value
        elif key in required:
            needed.append(key)
    needed += [r for r in sorted(required) if r not in call.arguments]
    checked = ToolCall(call.name, kept, call.id)
    if needed:
        return Verdict("ask", checked, spec, tuple(dict.fromkeys(needed)))
    errors = sorted(Draft202012Validator(dict(schema)).iter_errors(kept), key=str)
    if errors:
        return Verdict("ask", checked, spec, (), reason=errors[0].message)
    return Verdict("confirm" if spec.confirm else "run", checked, spec)


def _snapped(value: str, words: tuple[str, ...]) -> str:
    """`value`, or the one of the user's `words` it is a near miss of (module docstring)."""
    if not words or _DIGITS.search(value):
        return value
    from rapidfuzz import fuzz, process, utils

    best = process.extract(value, words, scorer=fuzz.ratio, processor=utils.default_process,
                           limit=2)
    if not best or best[0][1] < _SNAP_SCORE:
        return value
    if len(best) > 1 and best[0][1] - best[1][1] < _SNAP_LEAD:
        return value  # as near two of them: not for us to choose
    return str(best[0][0])


_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
_PM = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*p\.?\s?m\b", re.I)


def _afternoon(value: Any, said: str) -> Any:
    """A clock time the model wrote on the 12-hour dial for one the user said "pm" ("2 pm"
    written "2:00"): on the 24-hour one ("14:00")."""
    if not isinstance(value, str) or not (clock := _CLOCK.match(value)):
        return value
    hour, minute = int(clock.group(1)), clock.group(2)
    for pm in _PM.finditer(said):
        if int(pm.group(1)) == hour < 12 and (pm.group(2) or "00") == minute:
            return f"{hour + 12}:{minute}"
    return value


def _repaired(value: Any, prop: Mapping[str, Any]) -> Any:
    """Digits as the ASR wrote them ("55-12", "48 21") where the schema wants them joined
    ("^[0-9]{4}$"): joined, if that is all that is wrong."""
    from jsonschema import Draft202012Validator

    if not isinstance(value, str) or not re.search(r"\d[\s-]+\d", value):
        return value
    validator = Draft202012Validator(prop)
    joined = re.sub(r"(?<=\d)[\s-]+(?=\d)", "", value)
    if validator.is_valid(value) or not validator.is_valid(joined):
        return value
    return joined


def _said(value: Any, prop: Mapping[str, Any], said: str, numbers: set[str]) -> bool:
    if "enum" in prop or "const" in prop or isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return _number_said(value, numbers)
    if isinstance(value, str):
        groups = [g for g in _DIGITS.findall(value) if g.strip("0")]
        if groups:  # "4821", "10:00", "2026-12-11": each non-zero number must have been said
            return all(g.lstrip("0") in numbers for g in groups)
        from rapidfuzz import fuzz

        return fuzz.partial_ratio(value.lower(), said.lower()) >= _MIN_TEXT_MATCH
    if isinstance(value, list):
        return all(_said(v, prop.get("items", {}), said, numbers) for v in value)
    return True  # an object: its schema checked it


def _number_said(value: float, numbers: set[str]) -> bool:
    text = str(int(value)) if float(value).is_integer() else f"{value:g}"
    return text in numbers or value == 0


def _numbers(said: str) -> set[str]:
    """Every number in `said`, words turned to digits ("one hundred" -> 100)."""
    try:
        from text_to_num import alpha2digit

        digits = alpha2digit(said, "en", ordinal_threshold=0)  # "third" is 3rd too
    except Exception:  # noqa: BLE001 - a text it cannot read keeps its digits as written
        digits = said
    found = set()
    # "12 pounds 50" is 12.5; "100 and 50" is 150 (as alpha2digit leaves them)
    for whole, part in re.findall(
            r"(\d+) (?:pounds?|quid|euros?|dollars?) (?:and )?(\d{1,2})\b", digits):
        found.add(f"{int(whole) + int(part) / 100:g}")
    for hundreds, rest in re.findall(r"(\d+00) and (\d{1,2})\b", digits):
        found.add(str(int(hundreds) + int(rest)))
    for hour, minute in re.findall(r"\b(\d{1,2})[:.](\d{2})\b", digits):  # "2.30": 2 and 30
        found.update((hour.lstrip("0") or "0", minute.lstrip("0") or "0"))
    for pm in _PM.finditer(digits):  # "2 pm" is 14 on the 24-hour dial too
        if int(pm.group(1)) < 12:
            found.add(str(int(pm.group(1)) + 12))
    for text in (said, digits):
        for match in re.findall(r"\d[\d,]*(?:\.\d+)?", text):
            number = match.replace(",", "")
            found.add(number.lstrip("0") or "0")
            if "." in number:
                found.add(f"{float(number):g}")
        # Digits said one by one or in pairs ("four eight two one", "48 21"): one number too.
        for run in re.findall(r"\d+(?:[\s-]+\d+)+", text):
            found.add(re.sub(r"[\s-]+", "", run).lstrip("0") or "0")
    return found


_RESPONSE_OPEN, _RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
# After the result: without it the bank persona's facts-only rule won ("I'm sorry, I don't
# have that information" for a balance the result held, 2 of 3 results; with it 3 of 3 were
# told, measured on the 1.5B).
RESULT_NOTE = {
    "en": "(The app's answer, from the user's own account: tell them what it says, in one or "
          "two sentences.)",
    "zh": "（这是应用的回答，来自用户自己的账户：用一两句话告诉用户它说了什么。）",
}


def tool_response(result: str, language: str = "en") -> str:
    """A tool's result as the template gives it to the model (a user turn of its own), and
    the line that says to tell it. Tags inside the result are removed, so a result cannot
    close its wrapper or fake a call."""
    clean = re.sub(r"</?\s*(tool_response|tool_call|tools)\s*>", "", result)
    clean = clean.replace("<|im_start|>", "").replace("<|im_end|>", "")
    note = RESULT_NOTE.get(language, RESULT_NOTE["en"])
    return f"{_RESPONSE_OPEN}\n{clean}\n{_RESPONSE_CLOSE}\n{note}"


def is_tool_response(content: str) -> bool:
    return content.startswith(_RESPONSE_OPEN)
