"""Where engines keep derived files (converted models, built engines).

One writable directory, `$RTC_AVATAR_CACHE` or `~/.cache/rtc-avatar`. Nothing here is ever
downloaded: it only holds what the engines derive from installed packages.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """Return (and create) a subdirectory of the engine cache."""
    root = Path(os.environ.get("RTC_AVATAR_CACHE", Path.home() / ".cache" / "rtc-avatar"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
