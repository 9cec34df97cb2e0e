"""Text between the LLM and the voice: clause chunking (`chunker`) and normalization (`normalize`).

Pure Python, no models: `Chunker.push(delta) -> list[str]`, `Chunker.flush() -> list[str]`,
`normalize(chunk) -> str`.
"""

from engines.text.chunker import Chunker, ChunkerConfig
from engines.text.normalize import normalize

__all__ = ["Chunker", "ChunkerConfig", "normalize"]
