"""The shipped text-end probe on the model it was trained on (the bundled Qwen2.5-Coder-1.5B
in the transformers engine, bf16 as on the GPU profile; converted once from the GGUF, ~100 s
on 2 cores): whole requests read as whole, the same requests cut at a word boundary do not.
The texts are not in its training corpus (engines/turn/training/utterances.txt), nor are
near variants of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engines.llm.local import TransformersLLM
from engines.llm.prompt import PromptBuilder
from engines.llm.text_end import LlmTextEnd, load_text_end

pytestmark = pytest.mark.slow

WHOLE = ("What is the population of Canada?", "Please turn off the lights in the kitchen.",
         "How much does a ticket to Paris cost?", "I lost my credit card yesterday.")
CUT = ("What is the population of", "Please turn off the", "How much does a",
       "I lost my credit card and I")


@pytest.fixture(scope="module")
def text_end() -> Iterator[LlmTextEnd]:
    llm = TransformersLLM("qwen2.5-coder-1.5b",
                          prompt=PromptBuilder.for_persona("companion", "Ava"),
                          precision="bf16", temperature=0.0, history_tokens=512)
    try:
        probe = load_text_end(llm)
        assert probe is not None  # the weights match the probe's fingerprint
        yield probe
    finally:
        llm.close()


async def test_whole_requests_read_whole_and_cut_ones_do_not(text_end: LlmTextEnd) -> None:
    whole = [await text_end.probability(t) for t in WHOLE]
    cut = [await text_end.probability(t) for t in CUT]
    assert min(whole) > 0.5 > max(cut), (whole, cut)
