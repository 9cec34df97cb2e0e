"""Clause chunker: LLM text deltas in, speakable chunks out, the first one as early as possible.

Usage (one `Chunker` per agent turn; not thread-safe, it belongs to the turn's worker):

    chunker = Chunker()
    for delta in llm.stream(...):
        for chunk in chunker.push(delta):
            speak(normalize(chunk))
    for chunk in chunker.flush():
        speak(normalize(chunk))

Contract:
- Chunks are exact slices of the input: `"".join(all chunks) == "".join(all deltas)` (for input
  with any non-space character; whitespace-only input gives no chunk; up to the last sentence
  kept with `max_sentences`). A chunk keeps its trailing
  whitespace; strip it before synthesis.
- The first chunk ends at the first clause or sentence boundary (`, ; : — . ! ? …` and the
  Chinese `，、；：。！？`) once it holds `first_min_chars` (sizes by `chunk_size`); later
  chunks end at sentence ends once they hold `min_chars` (line breaks count as sentence ends).
  A chunk that would outgrow `first_max_chars` / `max_chars` (or, with `growth`, that many
  times the chunk before it) is cut at its last boundary, else
  at its last space (or between two Chinese characters); only text with no such place past the
  minimum is left longer.
- Cuts happen only at whitespace or after Chinese punctuation, so numbers ("3.5", "1,000"),
  URLs and times are never split; a period after a known abbreviation ("Dr.", "e.g.") or an
  initial ("J.") is not a sentence end.
- With `max_sentences`, the text ends at that sentence's end: the chunk holding it is
  emitted, the rest dropped (`closed`), so a caller can stop the text's source there.
- Decisions depend only on the text, never on how it was split into deltas: a boundary waits
  for the character after it (the next delta) to be sure, and `flush()` settles the end.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.text.zh_numbers import is_cjk

_SENTENCE_END = frozenset(".!?…")
_CLAUSE_END = frozenset(",;:—–")
_CJK_SENTENCE_END = frozenset("。！？")
_CJK_CLAUSE_END = frozenset("，、；：")
_CLOSERS = frozenset("\"')]}”’」』）》")
_PUNCT = _SENTENCE_END | _CLAUSE_END | _CJK_SENTENCE_END | _CJK_CLAUSE_END
# What a chunk may end with, for the voice (`engines.voicing`): closers stripped first.
SENTENCE_ENDS = _SENTENCE_END | _CJK_SENTENCE_END
CLAUSE_ENDS = _CLAUSE_END | _CJK_CLAUSE_END
CLOSERS = "".join(sorted(_CLOSERS))
# A period after these never ends a sentence (titles and "for example"-style abbreviations).
_NEVER_END = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "jr",
        "sr",
        "vs",
        "e.g",
        "i.e",
        "approx",
        "no",
        "fig",
        "dept",
        "gen",
        "col",
        "lt",
        "sgt",
        "rev",
        "est",
    ]
)
# A period after these ends a sentence only when a capital letter follows.
_MAYBE_END = frozenset(["etc", "a.m", "p.m", "inc", "ltd", "corp", "co", "u.s", "u.k", "ave", "rd"])


def chunk_size(text: str) -> int:
    """Length used for the limits: stripped characters, a Chinese character counting 3.

    (One Chinese character is one spoken syllable, about as long as a short English word.)
    """
    text = text.strip()
    return len(text) + 2 * sum(1 for ch in text if is_cjk(ch))


# The spoken answer's first chunk is cut at a space past this: the agent's and the offline
# renderer's default (shorter than ChunkerConfig's 40: the first audio matters most). 12
# rather than 20 took ~80 ms off voice-to-voice on 2 cores, at the price of a first chunk of
# two or three words ("The capital" / "of France is Paris."; bench/RESULTS.md).
FIRST_CHUNK_MAX_CHARS = 12


@dataclass(frozen=True)
class ChunkerConfig:
    first_min_chars: int = 3  # the first chunk may end at any clause boundary from this length
    first_max_chars: int = 40  # ...and is cut at a space beyond this (first audio matters most)
    min_chars: int = 20  # later chunks end at sentence ends from this length
    max_chars: int = 200  # ...and are cut at a clause boundary or space beyond this
    max_sentences: int = 0  # the text ends after this many sentences (0: no limit)
    # A later chunk is also cut (as past max_chars) once it outgrows this many times the
    # chunk before it, never under min_chars; 0 = off. For a voice that synthesizes a chunk
    # while the one before it plays: a fast LLM has the whole answer written during the first
    # chunk's synthesis, and a short first chunk followed by a long sentence leaves the voice
    # silent until that sentence is synthesized (rtc_server/agent.py derives it from the pace).
    growth: float = 0.0


class Chunker:
    """Turns a stream of text deltas into speakable chunks (see the module docstring)."""

    def __init__(self, config: ChunkerConfig | None = None) -> None:
        self.config = config or ChunkerConfig()
        if not 0 < self.config.first_min_chars <= self.config.first_max_chars:
            raise ValueError("need 0 < first_min_chars <= first_max_chars")
        if not 0 < self.config.min_chars <= self.config.max_chars:
            raise ValueError("need 0 < min_chars <= max_chars")
        if self.config.growth < 0:
            raise ValueError("need growth >= 0")
        self._buf = ""  # text not yet emitted
        self._pos = 0  # scan position in _buf; everything before it is decided
        self._emitted = 0  # chunks emitted so far
        self._boundary = 0  # end of the last boundary seen in _buf that did not qualify
        self._space = 0  # end of the last whitespace run (or CJK character) seen in _buf
        self._clause = 0  # end of the last boundary seen in _buf, whatever the chunk's size
        self._word = 0  # start of the last word seen in _buf (the text before it is whole)
        self._sentences = 0  # sentence ends passed so far
        self._last = 0  # chunk_size of the last chunk emitted
        self.closed = False  # `max_sentences` reached: the rest of the text is dropped

    def push(self, delta: str) -> list[str]:
        """Add a text delta; return the chunks it completes (often none)."""
        if self.closed:
            return []
        self._buf += delta
        return self._scan(final=False)

    def flush(self) -> list[str]:
        """End of the stream: return the remaining chunks and reset for reuse."""
        chunks = [] if self.closed else self._scan(final=True)
        if self._buf.strip():  # (empty once closed)
            chunks.append(self._buf)
        self._buf, self._pos, self._emitted = "", 0, 0
        self._boundary = self._space = self._clause = self._word = self._sentences = 0
        self._last = 0
        self.closed = False
        return chunks

    @property
    def pending_size(self) -> int:
        """`chunk_size` of the text waiting to be a chunk."""
        return chunk_size(self._buf)

    def cut(self, min_chars: int = 8) -> list[str]:
        """The text so far as a chunk now, whatever the limits: up to its last clause boundary,
        else before the word still arriving; nothing if that is under `min_chars`.

        For a voice about to run dry (the chunk that is playing ends before this sentence
        would): a pause at a comma or between words is shorter than the silence of waiting
        for the sentence's end.
        """
        end = self._clause or self._word
        if self.closed or not end or chunk_size(self._buf[:end]) < min_chars:
            return []
        out: list[str] = []
        self._emit(end, out)
        return out

    # --- internals -------------------------------------------------------------------------

    def _limits(self) -> tuple[int, int]:
        cfg = self.config
        if self._emitted == 0:
            return cfg.first_min_chars, cfg.first_max_chars
        if cfg.growth:
            return cfg.min_chars, min(cfg.max_chars, max(cfg.min_chars,
                                                         int(cfg.growth * self._last)))
        return cfg.min_chars, cfg.max_chars

    def _emit(self, end: int, out: list[str]) -> None:
        out.append(self._buf[:end])
        self._last = chunk_size(self._buf[:end])
        self._buf = self._buf[end:]
        self._pos = self._boundary = self._space = self._clause = self._word = 0
        self._emitted += 1

    def _scan(self, *, final: bool) -> list[str]:
        out: list[str] = []
        while self._pos < len(self._buf):
            buf, i = self._buf, self._pos
            lo, hi = self._limits()
            if chunk_size(buf[:i]) > hi and self._cut(lo, out):
                continue
            ch = buf[i]
            if ch in _PUNCT or ch == "\n":
                decided = self._boundary_at(i, final=final)
                if decided is None:
                    break  # need the next delta to decide
                end, kind = decided
                if end <= i:  # not a boundary
                    self._pos = i + 1
                    continue
                size = chunk_size(buf[:end])
                if size > hi and self._cut(lo, out):
                    continue  # an earlier cut keeps this chunk within the limit
                if kind == "sentence":
                    self._sentences += 1
                    if self._sentences == self.config.max_sentences:
                        self._emit(end, out)
                        self._buf, self.closed = "", True
                        return out
                if size >= lo and (self._emitted == 0 or kind == "sentence"):
                    self._emit(end, out)
                    continue
                if size >= lo:
                    self._boundary = end
                self._clause = self._word = end
                self._pos = end
                continue
            if i > 0 and (
                (not ch.isspace() and buf[i - 1].isspace()) or (is_cjk(ch) and is_cjk(buf[i - 1]))
            ):
                self._word = i
                if chunk_size(buf[:i]) >= lo:
                    self._space = i
            self._pos = i + 1
        if final:
            lo, hi = self._limits()
            if chunk_size(self._buf) > hi and self._cut(lo, out):
                out.extend(self._scan(final=True))  # the rest may need cutting again
        return out

    def _cut(self, lo: int, out: list[str]) -> bool:
        """Over the limit: cut at the last boundary, else the last space; False if neither."""
        end = self._boundary or self._space
        if end and chunk_size(self._buf[:end]) >= lo:
            self._emit(end, out)
            return True
        return False

    def _boundary_at(self, i: int, *, final: bool) -> tuple[int, str] | None:
        """Decide whether the punctuation at `i` ends a chunk.

        Returns (end, kind) with end > i for a boundary (end is after trailing closers and
        whitespace), (i, "") when it is not one, or None when later text is needed to tell.
        """
        buf, n = self._buf, len(self._buf)
        j = i
        while j < n and (buf[j] in _PUNCT or buf[j] in _CLOSERS or buf[j] == "\n"):
            j += 1
        cluster = buf[i:j]
        cjk = any(c in _CJK_SENTENCE_END or c in _CJK_CLAUSE_END for c in cluster)
        if j == n and not final:
            return None
        if not cjk and "\n" not in cluster and j < n and not buf[j].isspace():
            return (i, "")  # "3.5", "a.m.", "e.g.x", "http://a.b": no space, no boundary
        k = j
        while k < n and buf[k].isspace():
            k += 1
        if k == n and not final:
            return None  # a boundary, but where the next chunk starts is still unknown
        sentence = "\n" in cluster or any(
            c in _SENTENCE_END or c in _CJK_SENTENCE_END for c in cluster
        )
        if cluster.rstrip("".join(_CLOSERS)) == "." and not self._period_ends(i, k):
            return (i, "")
        return (k, "sentence" if sentence else "clause")

    def _period_ends(self, i: int, k: int) -> bool:
        """Is the single period at `i` a sentence end? (`k` is where the next word starts.)"""
        buf = self._buf
        start = i
        while start > 0 and not buf[start - 1].isspace():
            start -= 1
        word = buf[start:i].lower().lstrip("\"'([“‘")
        next_upper = k < len(buf) and buf[k].isupper()
        if word in _NEVER_END:
            return False
        if len(word) == 1 and word.isalpha():
            return not next_upper  # "J. Smith" is an initial
        if word in _MAYBE_END:
            return next_upper or k >= len(buf)
        return True
