"""Structured logging: one logfmt line per record, quiet by default.

`key=value` pairs come from the record's `extra` (e.g. `session_id`), so logs stay greppable and
machine-readable without a JSON dependency. Third-party loggers (aiortc, aioice, aiohttp access)
are held at WARNING unless the level is DEBUG.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime"}
)
_NOISY = ("aiortc", "aioice", "aiohttp.access", "av", "faster_whisper", "transformers")


def _quote(value: object) -> str:
    text = str(value)
    if text and not any(c in text for c in ' ="\n'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [
            f"ts={ts}.{int(record.msecs):03d}Z",
            f"level={record.levelname.lower()}",
            f"logger={record.name}",
            f"msg={_quote(record.getMessage())}",
        ]
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                parts.append(f"{key}={_quote(value)}")
        if record.exc_info:
            parts.append(f"exc={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


def setup_logging(level: str = "INFO") -> None:
    """Configure the root logger once for the process (server or CLI)."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for name in _NOISY:
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)


class ContextLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds fixed fields (e.g. `session_id`) to every record and keeps the
    call's own `extra` fields too (the stdlib adapter replaces them before Python 3.13)."""

    def process(self, msg: object, kwargs: Any) -> tuple[object, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs
