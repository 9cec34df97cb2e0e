"""A server's TOML for the tests and benchmarks: a profile's tables (such as config/gpu.toml)
with the caller's keys over them, section by section (bench/server_process.py's `agent_toml`,
bench/cluster.py's workers)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path

Table = Mapping[str, str | int | float | bool]


def _lines(section: str, keys: Table) -> list[str]:
    def value(v: str | int | float | bool) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)

    return [f"[{section}]", *(f"{key} = {value(v)}" for key, v in keys.items())]


def merged_toml(sections: Mapping[str, Table], base: Path | None = None) -> str:
    """`base`'s tables (a profile such as config/gpu.toml; None: none) with the keys of
    `sections` over them, section by section, as TOML."""
    tables: dict[str, dict[str, str | int | float | bool]] = {}
    if base is not None:
        for section, keys in tomllib.loads(base.read_text()).items():
            if not isinstance(keys, dict) or any(isinstance(v, (dict, list)) for v in
                                                 keys.values()):
                raise ValueError(f"{base}: [{section}] is not a table of plain values")
            tables[section] = dict(keys)
    for section, keys in sections.items():
        tables.setdefault(section, {}).update(keys)
    lines = [line for section, keys in tables.items() for line in _lines(section, keys)]
    return "\n".join(lines) + "\n"
