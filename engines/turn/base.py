"""Turn model contract: is the user's turn complete, judged from the audio of the last 8 s?

`TurnModel.complete_probability(pcm16k)` takes 16 kHz mono int16 ending now (the current
utterance, pre-roll included, trailing pause included; at most the last `WINDOW_S` seconds
are used, shorter audio is zero-padded in front) and returns the probability that the
speaker has finished their turn. It blocks (tens of milliseconds): the server calls it on an
executor, never on the event loop. One loaded model serves every session and may be called
from several threads at once.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

WINDOW_S = 8.0  # Smart Turn v3 reads an 80 x 800 log-mel: 8 s at 16 kHz, 10 ms hop


class TurnModel(Protocol):
    def complete_probability(self, pcm16k: np.ndarray) -> float: ...
