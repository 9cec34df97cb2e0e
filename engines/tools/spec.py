"""Tool declarations of one deployment (a TOML or JSON file, `[llm] tools`).

```toml
bridge = "Let me check that."          # said while a tool runs (optional; these are defaults)
[[tool]]
name = "freeze_card"
description = "Freeze one of the customer's payment cards so it cannot be used."
runs = "client"                        # the embedding app, over RTVI; or "http"
confirm = true                         # read back and wait for a yes before it runs
confirm_text = "I'll freeze the card ending {card_last4}. Shall I go ahead?"
sensitive = false                      # true: its arguments are never logged or sent as events
[tool.parameters]                      # JSON Schema (draft 2020-12) of the arguments
type = "object"
required = ["card_last4"]
[tool.parameters.properties.card_last4]
type = "string"
pattern = "^[0-9]{4}$"
```

An `http` tool names its `url` and, for a secret, `secret_env` (the environment variable that
holds it) and `secret_header` (default `Authorization`); the file never holds the secret.
Everything is checked at load: a bad file stops start-up with the tool and field named.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engines.errors import EngineError

Runs = Literal["client", "http"]
_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
_TOOL_KEYS = {
    "name", "description", "runs", "parameters", "confirm", "confirm_text", "sensitive", "url",
    "secret_env", "secret_header", "timeout_s", "bridge",
}


class ToolsError(EngineError):
    """A tools file that cannot be used (named, with the tool and the field)."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON Schema of the arguments object
    runs: Runs = "client"
    confirm: bool = False  # moves money or changes an account: a spoken yes first
    confirm_text: str = ""  # the read-back, with {argument} fields; "" = a generic one
    sensitive: bool = False  # arguments never logged, nor sent in events
    url: str = ""  # http: where the call is POSTed
    secret_env: str = ""  # http: the environment variable holding the secret
    secret_header: str = "Authorization"
    timeout_s: float = 10.0
    bridge: str | None = None  # said while it runs; None = the file's `bridge`

    @property
    def title(self) -> str:
        """How the agent names the action aloud ("freeze_card" -> "freeze card")."""
        return self.name.replace("_", " ")

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function declaration the chat template expects."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": dict(self.parameters)}}

    def secret(self) -> str | None:
        return os.environ.get(self.secret_env) if self.secret_env else None


@dataclass(frozen=True)
class Phrases:
    """What the agent says around a call (each may be set at the top of the tools file)."""

    bridge: str = "Let me check that."
    confirm: str = "I'm about to {action}{details}. Shall I go ahead?"
    cancelled: str = "Okay, I won't do that."
    # {action}: the tool's name as words ("freeze card"), {reason}: why it failed
    failed: str = "Sorry, that didn't work: {reason}."
    timed_out: str = "Sorry, that didn't work: the app didn't answer in time."
    refused: str = "Sorry, that's not something I can do here."
    done: str = "That's done."  # a call repeated after its result, where words were asked for
    missing: str = "To do that, I need {needed}."  # {needed}: the parameters' descriptions


@dataclass(frozen=True)
class ToolSet:
    tools: tuple[ToolSpec, ...]
    phrases: Phrases = field(default_factory=Phrases)
    max_result_chars: int = 2000  # a longer result is cut before the model reads it
    max_calls_per_turn: int = 2  # one request never runs more calls than this

    def get(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    @classmethod
    def load(cls, path: str | Path) -> ToolSet:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ToolsError(f"tools file {path}: {exc.strerror or exc}") from exc
        try:
            raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ToolsError(f"tools file {path} is not valid "
                             f"{'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from exc
        return cls.from_dict(raw, str(path))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str = "tools") -> ToolSet:
        if not isinstance(raw, Mapping):
            raise ToolsError(f"{where}: expected a table with [[tool]] entries")
        phrase_keys = set(Phrases.__dataclass_fields__)
        unknown = set(raw) - phrase_keys - {"tool", "max_result_chars", "max_calls_per_turn"}
        if unknown:
            raise ToolsError(f"{where}: unknown keys {sorted(unknown)}")
        phrases = Phrases(**{k: _text(raw[k], f"{where}: {k}") for k in phrase_keys & set(raw)})
        entries = raw.get("tool", [])
        if not isinstance(entries, list) or not entries:
            raise ToolsError(f"{where}: no [[tool]] entries")
        tools = tuple(_tool(e, f"{where}: tool {i + 1}") for i, e in enumerate(entries))
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ToolsError(f"{where}: a tool name is declared twice: {names}")
        return cls(tools, phrases, _positive_int(raw.get("max_result_chars", 2000),
                                                 f"{where}: max_result_chars"),
                   _positive_int(raw.get("max_calls_per_turn", 2),
                                 f"{where}: max_calls_per_turn"))


def _tool(raw: Any, where: str) -> ToolSpec:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(raw, Mapping):
        raise ToolsError(f"{where}: expected a table")
    unknown = set(raw) - _TOOL_KEYS
    if unknown:
        raise ToolsError(f"{where}: unknown keys {sorted(unknown)}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolsError(f"{where}: name must be letters, digits and _ (got {name!r})")
    where = f"{where} ({name})"
    description = _text(raw.get("description"), f"{where}: description")
    parameters = raw.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise ToolsError(f"{where}: parameters must be a JSON Schema with type \"object\"")
    try:
        Draft202012Validator.check_schema(dict(parameters))
    except SchemaError as exc:
        raise ToolsError(f"{where}: parameters is not a valid JSON Schema: {exc.message}") from exc
    properties = parameters.get("properties", {})
    missing = [r for r in parameters.get("required", []) if r not in properties]
    if missing:
        raise ToolsError(f"{where}: required {missing} not in properties")
    runs = raw.get("runs", "client")
    if runs not in ("client", "http"):
        raise ToolsError(f"{where}: runs must be \"client\" or \"http\" (got {runs!r})")
    url = raw.get("url", "")
    if runs == "http" and not (isinstance(url, str) and re.match(r"^https?://", url)):
        raise ToolsError(f"{where}: an http tool needs url = \"http(s)://...\"")
    timeout = raw.get("timeout_s", 10.0)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ToolsError(f"{where}: timeout_s must be a number > 0")
    confirm_text = raw.get("confirm_text", "")
    for key in re.findall(r"{(\w+)}", confirm_text):
        if key not in properties:
            raise ToolsError(f"{where}: confirm_text names {{{key}}}, not a parameter")
    flags = {k: raw.get(k, False) for k in ("confirm", "sensitive")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ToolsError(f"{where}: {key} must be true or false")
    bridge = raw.get("bridge")
    return ToolSpec(
        name=name, description=description, parameters=dict(parameters), runs=runs,
        confirm=flags["confirm"], confirm_text=str(confirm_text),
        sensitive=flags["sensitive"], url=url,
        secret_env=str(raw.get("secret_env", "")),
        secret_header=str(raw.get("secret_header", "Authorization")),
        timeout_s=float(timeout), bridge=None if bridge is None else str(bridge),
    )


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolsError(f"{where} must be a non-empty string")
    return value


def _positive_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ToolsError(f"{where} must be an integer > 0")
    return value
