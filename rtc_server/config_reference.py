"""The configuration reference, docs/configuration.md, generated from the config classes.

Contract: `render()` returns the whole page: one section per field of
`rtc_server.config.Config` (a TOML table), one row per key with its type, its default and the
comment written above or beside the field in its source, read with `ast` and `tokenize`. A
field with no comment of its own shares the row of the field on the line just above it when
that one's comment stands above it (a pair such as `secret` / `secret_env`); any other
uncommented field raises `UndocumentedField`, so a key nobody described cannot ship. A
`# --- name ---` line among the fields starts a sub-table.

    python -m rtc_server.config_reference > docs/configuration.md

tests/test_config_reference.py fails when the page differs from what this writes now.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import json
import re
import sys
import tokenize
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from rtc_server.config import Config

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"
_MARKER = re.compile(r"^---\s*(.*?)\s*---$")

# Fields of rtc_server/config.py that carry no comment in their source yet. Their text lives
# here until the source has it: `stale_fallbacks()` names any entry whose field has gained a
# comment, and the test fails until the entry is removed, so the two never disagree.
FALLBACKS: dict[str, str] = {
    "ServerConfig.host": "Address the HTTP server binds (the page, the API, `/metrics`).",
    "ServerConfig.port": "TCP port of the HTTP server; 0 = one the system picks.",
    "ServerConfig.log_level": "Level of the logfmt lines on stderr (`DEBUG`, `INFO`, "
                              "`WARNING`, `ERROR`): one line per model load and per session "
                              "start and end at `INFO`.",
    "IceServer.urls": "The server's `stun:`, `turn:` or `turns:` URLs.",
    "IceServer.username": "TURN user name, if the server needs one.",
    "IceServer.credential": "TURN password, if the server needs one.",
    "MediaConfig.width": "Outbound video width in pixels (even, 16..1920).",
    "MediaConfig.height": "Outbound video height in pixels (even, 16..1920).",
    "MediaConfig.fps": "Outbound video frame rate (1..60).",
}


class UndocumentedField(Exception):
    """A config field with no comment in its source (and no entry in `FALLBACKS`)."""


@dataclass(frozen=True)
class Row:
    """One line of a section's table: a field, or a pair that shares one comment."""

    names: tuple[str, ...]
    types: tuple[str, ...]
    defaults: tuple[str, ...]
    text: str
    group: str  # the `# --- name ---` sub-table it belongs to ("" = the section's own)


@dataclass(frozen=True)
class _Source:
    lines: list[str]
    comments: dict[int, str]  # line number -> the comment's text, without its '#'
    module: ast.Module


@cache
def _source(path: str) -> _Source:
    text = Path(path).read_text(encoding="utf-8")
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT}
    return _Source(text.splitlines(), comments, ast.parse(text))


def _class_node(cls: type) -> tuple[_Source, ast.ClassDef]:
    path = inspect.getsourcefile(cls)
    if path is None:
        raise UndocumentedField(f"{cls.__qualname__}: no source file to read comments from")
    source = _source(path)
    for node in source.module.body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return source, node
    raise UndocumentedField(f"{cls.__qualname__}: not a top-level class of {path}")


def _is_comment_line(source: _Source, line: int) -> bool:
    return 1 <= line <= len(source.lines) and source.lines[line - 1].lstrip().startswith("#")


def _leading(source: _Source, line: int) -> list[str]:
    """The full-line comments directly above `line`, top first."""
    found: list[str] = []
    above = line - 1
    while _is_comment_line(source, above):
        found.insert(0, source.comments[above])
        above -= 1
    return found


def _trailing(source: _Source, node: ast.AnnAssign) -> list[str]:
    end = node.end_lineno or node.lineno
    return [source.comments[n] for n in range(node.lineno, end + 1)
            if n in source.comments and not _is_comment_line(source, n)]


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        arms = [a for a in get_args(tp) if a is not type(None)]
        name = " or ".join(_type_name(a) for a in arms)
        return f"{name} (optional)" if len(arms) < len(get_args(tp)) else name
    if origin is Literal:
        return " or ".join(json.dumps(a) for a in get_args(tp))
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            inner = args[0]
            if dataclasses.is_dataclass(inner):
                return "list of tables"
            return f"list of {_type_name(inner)}"
        return "[" + ", ".join(_type_name(a) for a in args) + "]"
    return getattr(tp, "__name__", str(tp))


def _value(value: Any) -> str:
    """A default as it is written in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        value: Any = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    return "unset" if value is None else f"`{_value(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows(cls: type) -> list[Row]:
    """The table rows of dataclass `cls`, each field with the comment its source gives it.

    Raises:
        UndocumentedField: a field has no comment, shares none and has no fallback.
    """
    source, node = _class_node(cls)
    nodes = {n.target.id: n for n in node.body
             if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    hints = get_type_hints(cls)
    out: list[Row] = []
    group = ""
    shared_from: ast.AnnAssign | None = None  # a field whose comment stands above it
    for f in dataclasses.fields(cls):
        field_node = nodes[f.name]
        lead = _leading(source, field_node.lineno)
        marks = [m.group(1) for m in map(_MARKER.match, lead) if m]
        if marks:
            group = marks[-1]
        lead = [line for line in lead if not _MARKER.match(line)]
        text = " ".join(lead + _trailing(source, field_node))
        key = f"{cls.__name__}.{f.name}"
        name, tp, default = f.name, _type_name(hints[f.name]), _default(f)
        if not text and key in FALLBACKS:
            text = FALLBACKS[key]
        if text:
            out.append(Row((name,), (tp,), (default,), _cell(text), group))
            shared_from = field_node if lead else None
            continue
        if shared_from is not None and field_node.lineno == (shared_from.end_lineno or 0) + 1:
            last = out[-1]
            out[-1] = dataclasses.replace(last, names=(*last.names, name),
                                          types=(*last.types, tp),
                                          defaults=(*last.defaults, default))
            shared_from = field_node
            continue
        raise UndocumentedField(
            f"{key} ({inspect.getsourcefile(cls)}:{field_node.lineno}) has no comment: "
            "write one above or beside it")
    return out


def _field_comment(cls: type, name: str) -> str:
    """The comment written above or beside field `name` of `cls` ("" if none)."""
    source, node = _class_node(cls)
    for n in node.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) \
                and n.target.id == name:
            lead = [c for c in _leading(source, n.lineno) if not _MARKER.match(c)]
            return " ".join(lead + _trailing(source, n))
    return ""


def stale_fallbacks() -> list[str]:
    """Entries of `FALLBACKS` whose field now has a comment in its source."""
    return [key for key in FALLBACKS
            if _field_comment(_CLASSES[key.split(".")[0]], key.split(".")[1])]


def _nested(cls: type) -> dict[str, type]:
    """Fields of `cls` that hold a list of tables: name -> the tables' dataclass."""
    found: dict[str, type] = {}
    for name, tp in get_type_hints(cls).items():
        if get_origin(tp) is tuple:
            args = get_args(tp)
            if len(args) == 2 and args[1] is Ellipsis and dataclasses.is_dataclass(args[0]):
                found[name] = args[0]  # type: ignore[assignment]
    return found


def _sections() -> list[tuple[str, type]]:
    hints = get_type_hints(Config)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(Config)]


def _all_classes() -> dict[str, type]:
    classes: dict[str, type] = {}
    for _, cls in _sections():
        classes[cls.__name__] = cls
        for inner in _nested(cls).values():
            classes[inner.__name__] = inner
    return classes


_CLASSES = _all_classes()


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _intro(section: str, cls: type) -> str:
    """What the section is for: the comment on its `Config` field, else the class's
    docstring (a dataclass's generated one does not count), else its module's where the
    module holds no other section's class; else nothing."""
    text = _field_comment(Config, section)
    if text:
        return text
    own = cls.__dict__.get("__doc__")
    if own and not own.startswith(f"{cls.__name__}("):
        return _first_paragraph(own)
    if sum(c.__module__ == cls.__module__ for _, c in _sections()) > 1:
        return ""
    return _first_paragraph(sys.modules[cls.__module__].__doc__)


def _table(table_rows: list[Row]) -> list[str]:
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for row in table_rows:
        names = ", ".join(f"`{n}`" for n in row.names)
        lines.append(f"| {names} | {_cell(', '.join(row.types))} | "
                     f"{', '.join(row.defaults)} | {row.text} |")
    return lines


def _section(section: str, cls: type) -> list[str]:
    path = Path(inspect.getsourcefile(cls) or "").resolve().relative_to(ROOT).as_posix()
    intro = _intro(section, cls)
    lines = [f"## `[{section}]`", "",
             f"[`{path}`](../{path}) `{cls.__name__}`." + (f" {intro}" if intro else ""), ""]
    table_rows = rows(cls)
    groups = list(dict.fromkeys(row.group for row in table_rows))
    for group in groups:
        if group:
            lines += [f"*{group}*", ""]
        lines += _table([r for r in table_rows if r.group == group]) + [""]
    for name, inner in _nested(cls).items():
        lines += [f"Each `[[{section}.{name}]]` table (`{inner.__name__}`):", ""]
        lines += _table(rows(inner)) + [""]
    return lines


HEADER = """\
# Configuration reference

<!-- Generated by `python -m rtc_server.config_reference > docs/configuration.md` from the
config classes and the comments on their fields; edit those, not this page
(tests/test_config_reference.py fails when the two differ). -->

Every option has a default, the embedded offline setup, so the server needs no file. A TOML
file given with `--config FILE` overrides any of them, section by section; unknown keys and
values of the wrong type stop the server at start-up with the key named (exit code 2).
[`config.example.toml`](../config.example.toml) lists every key at its default;
[`config/gpu.toml`](../config/gpu.toml) is the GPU profile ([gpu.md](gpu.md)). Two sections
change other sections' defaults: `[profile]` fills the keys left unset here (the LLM and ASR
models, the LLM threads, the first-token deadline) from a measurement of the machine
([hardware-and-latency.md](hardware-and-latency.md)), and `[conversation] language = "zh"`
switches the keys still at their English defaults to Chinese ones ([chinese.md](chinese.md)).

"""


def render() -> str:
    """The whole page, docs/configuration.md."""
    lines = [f"- [`[{name}]`](#{name})" for name, _ in _sections()]
    out = HEADER + "\n".join(lines) + "\n\n"
    for name, cls in _sections():
        out += "\n".join(_section(name, cls)) + "\n"
    return out.rstrip("\n") + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
