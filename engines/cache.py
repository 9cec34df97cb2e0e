"""Where engines keep derived files (converted models, built engines).

One writable directory, `$RTC_AVATAR_CACHE` or `~/.cache/rtc-avatar`. Nothing here is ever
downloaded: it only holds what the engines derive from installed packages, e.g. a model
shipped in parts that `join_parts` writes out as one file.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from engines.progress import Progress

_BLOCK = 8 << 20


def cache_dir(*parts: str) -> Path:
    """Return (and create) a subdirectory of the engine cache."""
    root = Path(os.environ.get("RTC_AVATAR_CACHE", Path.home() / ".cache" / "rtc-avatar"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def join_parts(parts: Sequence[Path], out: Path, label: str, logger: logging.Logger) -> str:
    """Write `parts` one after the other into `out`, logging progress as `label`; return the
    sha256 of what was written (the caller checks it, and moves `out` into place)."""
    total = sum(p.stat().st_size for p in parts)
    digest = hashlib.sha256()
    progress = Progress(logger, label, total)
    done = 0
    with out.open("wb") as sink:
        for part in parts:
            with part.open("rb") as f:
                while block := f.read(_BLOCK):
                    digest.update(block)
                    sink.write(block)
                    done += len(block)
                    progress.update(done)
    return digest.hexdigest()
