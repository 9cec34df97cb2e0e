"""The text-end probe (engines/turn/text_end.py) on a chat engine's own hidden states.

The forward runs on the engine's own probe thread (`last_hidden_state`: one forward without a
cache, beside the answers' decoding rather than behind it; on CUDA a captured graph per
prompt-length bucket, `prepare_hidden_states`, engines/llm/hidden_graphs.py): awaited here,
it never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

import numpy as np

from engines.turn.text_end import (
    FINGERPRINT_COLS,
    FINGERPRINT_ROWS,
    HEAD,
    PROBE_FILE,
    TextEndProbe,
    normalized,
)

logger = logging.getLogger(__name__)
SAMPLE = "Could you tell me how long it takes to boil an egg"  # a capture check's words


class HiddenStates(Protocol):
    """What a chat engine offers the probe (engines/llm/local.py, `TransformersLLM`)."""

    def last_hidden_state(self, prompt: str) -> Future[np.ndarray]: ...

    def embedding_rows(self, rows: Sequence[int], cols: int) -> np.ndarray: ...


class LlmTextEnd:
    """`engines.turn.text_end.TextEnd` on a chat engine's hidden states."""

    def __init__(self, model: HiddenStates, probe: TextEndProbe) -> None:
        self._model = model
        self._probe = probe

    async def probability(self, text: str) -> float:
        words = normalized(text)
        if not words:
            return 0.0
        hidden = await asyncio.wrap_future(self._model.last_hidden_state(HEAD + words))
        return self._probe.probability(hidden)


def load_text_end(llm: object, path: Path = PROBE_FILE) -> LlmTextEnd | None:
    """The probe on `llm` (the chat engine, its wrappers looked through), or None with a
    warning where it cannot read: an engine without hidden states (llama.cpp, a server), or
    weights other than the probe's (another model, the GPU benchmarks' random weights)."""
    while not hasattr(llm, "last_hidden_state") and hasattr(llm, "inner"):
        llm = llm.inner
    if not (hasattr(llm, "last_hidden_state") and hasattr(llm, "embedding_rows")):
        logger.warning("[turn] text_end: the chat engine %s gives no hidden states (the "
                       "transformers engine does); the end of turn goes without the text "
                       "probe", type(llm).__name__)
        return None
    probe = TextEndProbe.load(path)
    if not probe.matches(llm.embedding_rows(FINGERPRINT_ROWS, FINGERPRINT_COLS)):
        logger.warning("[turn] text_end: the chat model's weights are not the ones the probe "
                       "was trained on (%s); the end of turn goes without it", path.name)
        return None
    prepare = getattr(llm, "prepare_hidden_states", None)
    if prepare is not None:  # the forward captured where the engine can (CUDA graphs)
        prepare(HEAD + SAMPLE).result()
    return LlmTextEnd(llm, probe)
