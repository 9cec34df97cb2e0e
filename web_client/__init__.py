"""The browser client: static HTML/JS/CSS served by the server (no build step, no CDN)."""

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent
