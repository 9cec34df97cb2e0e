"""A server's TOML made of a profile's tables (such as config/gpu.toml) with the caller's
keys over them, section by section: `python -m rtc_server.cluster --config` for its workers,
the benchmarks' servers (bench/server_process.py, bench/cluster.py).

Sections hold plain values (strings, numbers, booleans) or lists of them, as every
section of the server's config does; a nested table is refused rather than guessed."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

Plain = str | int | float | bool
Value = Plain | Sequence[Plain]
Table = Mapping[str, Value]


def _plain(v: object) -> bool:
    return isinstance(v, (str, int, float, bool))


def _value(v: Value) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int, float)):
        return json.dumps(v)  # a JSON string or number is a TOML one
    return "[" + ", ".join(_value(item) for item in v) + "]"


def _lines(section: str, keys: Table) -> list[str]:
    return [f"[{section}]", *(f"{key} = {_value(v)}" for key, v in keys.items())]


def merged_toml(sections: Mapping[str, Table], base: Path | None = None) -> str:
    """`base`'s tables (a profile such as config/gpu.toml; None: none) with the keys of
    `sections` over them, section by section, as TOML."""
    tables: dict[str, dict[str, Value]] = {}
    if base is not None:
        for section, keys in tomllib.loads(base.read_text()).items():
            if not isinstance(keys, dict) or not all(
                    _plain(v) or (isinstance(v, list) and all(_plain(i) for i in v))
                    for v in keys.values()):
                raise ValueError(f"{base}: [{section}] is not a table of plain values")
            tables[section] = dict(keys)
    for section, keys in sections.items():
        tables.setdefault(section, {}).update(keys)
    lines = [line for section, keys in tables.items() for line in _lines(section, keys)]
    return "\n".join(lines) + "\n"
