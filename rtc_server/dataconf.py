"""Build frozen config dataclasses from plain TOML tables, with clear errors.

Unknown keys and wrong types are rejected with the dotted path of the offending key, so a typo
in a config file fails at start-up instead of being silently ignored.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from rtc_server.errors import ConfigError

T = TypeVar("T")


def _convert(value: Any, tp: Any, path: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        errors = []
        for arm in get_args(tp):
            if arm is type(None):
                if value is None:
                    return None
                continue
            try:
                return _convert(value, arm, path)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{path}: invalid value {value!r}")
    if origin is Literal:
        if value not in get_args(tp):
            choices = ", ".join(repr(a) for a in get_args(tp))
            raise ConfigError(f"{path}: {value!r} is not one of {choices}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{path}: expected a list, got {type(value).__name__}")
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"{path}: expected {len(args)} items, got {len(value)}")
        pairs = enumerate(zip(args, value, strict=True))
        return tuple(_convert(v, a, f"{path}[{i}]") for i, (a, v) in pairs)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a table, got {type(value).__name__}")
        return from_dict(tp, value, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{path}: unsupported config type {tp!r}")


def from_dict(cls: type[T], data: dict[str, Any], path: str = "") -> T:
    """Instantiate dataclass `cls` from `data`; missing keys take the dataclass defaults."""
    hints = get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - fields)
    if unknown:
        where = f"[{path}] " if path else ""
        raise ConfigError(f"{where}unknown key(s): {', '.join(unknown)}")
    kwargs = {
        name: _convert(value, hints[name], f"{path}.{name}" if path else name)
        for name, value in data.items()
    }
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"[{path}] {exc}" if path else str(exc)) from exc


def replace_path(obj: T, dotted: str, value: Any) -> T:
    """Return a copy of nested frozen dataclass `obj` with `a.b.c` set (type-checked)."""
    head, _, rest = dotted.partition(".")
    if not dataclasses.is_dataclass(obj) or head not in {f.name for f in dataclasses.fields(obj)}:
        raise ConfigError(f"unknown config key {dotted!r}")
    if rest:
        new = replace_path(getattr(obj, head), rest, value)
    else:
        new = _convert(value, get_type_hints(type(obj))[head], head)
    return typing.cast(T, dataclasses.replace(obj, **{head: new}))  # type: ignore[type-var]
