"""What users say to an agent, written by the bundled chat model: the text completeness
probe's complete examples (its incomplete ones are their prefixes, `data.py`).

Why generated: no corpus of spoken requests ships in a package here, and the probe must not
learn this project's benchmark questions (bench/questions_heldout*.txt, testkit.pauses): the
files given as `--exclude` are removed from what is written. Topics x kinds of utterance,
sampled (temperature 0.9), so the words are the model's and the spread is the topics'. The
file written (`engines/turn/training/utterances.txt`) is committed: training is repeatable
without re-generating (~15 min on 2 cores).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

TOPICS = (
    "a bank account and cards", "a mortgage or a loan", "taxes", "insurance claims",
    "travel and flights", "hotels", "trains and buses", "the weather", "cooking a dinner",
    "baking", "restaurants", "groceries", "health symptoms", "medicine", "fitness and exercise",
    "sleep", "history", "geography and countries", "capital cities", "space and planets",
    "physics", "chemistry", "biology and animals", "plants and gardening", "math homework",
    "learning a language", "grammar and words", "literature and books", "poetry", "music",
    "movies and series", "painting and art", "sports rules", "football", "famous people",
    "computers and phones", "fixing a wifi problem", "programming", "a phone bill",
    "online shopping and returns", "a package delivery", "cars and driving", "home repair",
    "renting an apartment", "pets", "parenting", "school and exams", "university",
    "a job interview", "work and a boss", "money and saving", "investing", "cryptocurrency",
    "time zones and dates", "units and conversions", "the news", "economics", "philosophy",
    "religions and holidays", "the human body", "the ocean", "dinosaurs", "inventions",
    "electricity at home", "a password reset", "a doctor's appointment", "a birthday party",
    "a wedding", "a recipe substitute", "coffee and tea", "wine", "the environment",
    "recycling", "energy and solar panels", "the stock market", "a credit score",
    "a lost wallet", "a museum visit", "a road trip", "camping", "mountains and hiking",
)
KINDS = (
    "Each one is a question.",
    "Each one is a request or an instruction (such as tell me, explain, give me, show, find, "
    "help me, describe, name, list).",
    "Each one is a statement about the speaker's own situation or problem, not a question.",
    "Each one is short: three to six words.",
)
PER_PROMPT = 8
_NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|[a-z][.)])\s*")
_MIN_WORDS, _MAX_WORDS = 2, 30


def clean(line: str) -> str | None:
    """One written utterance from a line of the model's list, or None."""
    text = _NUMBERING.sub("", line).strip().strip('"\u201c\u201d').strip()
    words = text.split()
    if not _MIN_WORDS <= len(words) <= _MAX_WORDS or ":" in text:
        return None
    return text


def written(model: str | None = None, seed: int = 1) -> Iterator[str]:
    """Utterances from the bundled GGUF (`model` as the server's [llm] model)."""
    from llama_cpp import Llama

    from engines.llm.model_files import resolve_gguf

    llm = Llama(model_path=str(resolve_gguf(model)), n_ctx=1024, n_threads=2, seed=seed,
                verbose=False)
    total = len(TOPICS) * len(KINDS)
    for n, (topic, kind) in enumerate(((t, k) for t in TOPICS for k in KINDS), 1):
        ask = (f"Write {PER_PROMPT} different things a person might say out loud to a voice "
               f"assistant about {topic}. {kind} One per line, no numbering, no quotes.")
        reply = llm.create_chat_completion(
            [{"role": "user", "content": ask}], temperature=0.9, top_p=0.95, max_tokens=320)
        content = reply["choices"][0]["message"]["content"] or ""  # type: ignore[index]
        for line in content.splitlines():
            if (text := clean(line)) is not None:
                yield text
        logger.info("corpus: %d/%d prompts", n, total)


def excluded(files: Sequence[Path]) -> set[str]:
    """The texts of `files` (one a line, '#' comments), normalized: never training data."""
    from engines.turn.text_end import normalized

    texts: set[str] = set()
    for path in files:
        texts.update(line for line in path.read_text(encoding="utf-8").splitlines()
                     if line.strip() and not line.startswith("#"))
    return {normalized(t).lower() for t in texts}


def write(path: Path, model: str | None = None, exclude: Sequence[Path] = ()) -> int:
    from engines.turn.text_end import normalized

    seen = excluded(exclude)
    kept: list[str] = []
    for text in written(model):
        key = normalized(text).lower()
        if key and key not in seen:
            seen.add(key)
            kept.append(text)
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return len(kept)
