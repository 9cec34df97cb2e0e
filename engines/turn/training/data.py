"""The probe's examples: each written utterance whole (label 1) and cut at a word boundary
(label 0), as the ASR would hand them over at a pause: without a closing mark.

A cut that is itself one of the whole utterances ("Tell me a joke" from "Tell me a joke
about cats") is dropped: it is not an unfinished message. Other cuts that happen to be
sentences stay labelled unfinished; they are what a user pausing mid-request says, and the
probe's probability, not a rule, weighs them against whole requests.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from engines.turn.text_end import normalized

CUTS_PER_UTTERANCE = 1


@dataclass(frozen=True)
class Example:
    text: str
    whole: bool
    source: int  # the utterance's index: a split keeps an utterance and its cuts together


def examples(utterances: Sequence[str], seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    wholes = {normalized(u).lower() for u in utterances}
    out: list[Example] = []
    seen: set[str] = set()
    for k, utterance in enumerate(utterances):
        text = normalized(utterance)
        if not text or text.lower() in seen:
            continue
        seen.add(text.lower())
        out.append(Example(text, True, k))
        words = utterance.split()
        cuts = list(range(1, len(words)))
        rng.shuffle(cuts)
        for cut in sorted(cuts[:CUTS_PER_UTTERANCE]):
            part = normalized(" ".join(words[:cut]))
            if part and part.lower() not in wholes and part.lower() not in seen:
                seen.add(part.lower())
                out.append(Example(part, False, k))
    return out
