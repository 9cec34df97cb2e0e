"""Keep what cannot be said out of a streamed answer: code, web addresses, markdown, lists.

The personas ask the model for plain spoken sentences; `SpokenFilter` enforces it on the token
stream, before the clause chunker, so nothing of this kind ever reaches the voice:

- fenced code blocks (```...```) are dropped whole; inline `code` keeps its words;
- web addresses (http://..., https://..., www....) become "the website";
- headings, list bullets and numbers ("- ", "* ", "1. ", "2) ") at line starts are dropped
  (the line break stays, and the chunker ends a chunk there); emphasis and heading marks
  (*, #, `), table bars and emoji are removed.

Streaming: text is passed on as soon as it cannot be the start of one of those, so the first
clause is not delayed (at most a few characters wait for the next delta).
"""

from __future__ import annotations

import re

_FENCE = "```"
_URL_START = re.compile(r"(?:https?://|www\.)", re.I)
_URL_PREFIXES = ("http://", "https://", "www.")
_SPACE = re.compile(r"\s")
_LINE_MARKER = re.compile(r"[ \t]*(?:[-•+][ \t]+|\d{1,3}[.)][ \t]+|>[ \t]*)|[ \t]+")
_DROP = str.maketrans("", "", "*#|")  # emphasis, heading marks and table bars
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f900-\U0001f9ff\ufe0f\u200d]+"
)
URL_WORDS = "the website"


class SpokenFilter:
    def __init__(self) -> None:
        self._pending = ""  # text not yet decided on
        self._line_start = True  # the pending text starts a line
        self._in_code = False
        self._in_url = False
        self._spoken = "\n"  # the last character passed on (no double spaces from removals)

    def push(self, delta: str) -> str:
        """Add a delta; return the text that is safe to speak now."""
        # Markup and emoji go first, so that nothing they hid can appear once they are gone
        # ("http#s://..." is a web address too).
        self._pending += _EMOJI.sub("", delta.translate(_DROP))
        return self._drain(final=False)

    def flush(self) -> str:
        """End of the answer: whatever is left, filtered."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> str:
        s, i, out = self._pending, 0, []
        hold = len(s)  # where the undecided text starts (len(s): nothing undecided)
        while i < len(s):
            if self._in_code:
                end = s.find(_FENCE, i)
                if end < 0:  # dropped, but a trailing "`" or "``" may open the closing fence
                    hold = len(s) if final else max(i, len(s.rstrip("`")))
                    i = len(s)
                    break
                i, self._in_code = end + len(_FENCE), False
                continue
            if self._in_url:
                space = _SPACE.search(s, i)
                if space is None:
                    i = len(s)
                    break
                i, self._in_url = space.start(), False
                continue
            if self._line_start:
                newline = s.find("\n", i)
                head = s[i:] if newline < 0 else s[i:newline]
                if newline < 0 and not final and len(head) < 4:
                    hold = i  # too little to tell a marker from a word
                    break
                if head.lstrip().startswith(_FENCE):
                    i, self._in_code = s.index(_FENCE, i) + len(_FENCE), True
                else:
                    marker = _LINE_MARKER.match(s, i)
                    i = marker.end() if marker is not None else i
                self._line_start = False
                continue
            c = s[i]
            if c == "\n":
                out.append(c)
                i, self._line_start = i + 1, True
            elif c == "`":
                if s.startswith(_FENCE, i):
                    i, self._in_code = i + len(_FENCE), True
                elif not final and _FENCE.startswith(s[i:]):
                    hold = i
                    break
                else:
                    i += 1  # inline code: its words stay, the backtick goes
            elif _URL_START.match(s, i):
                out.append(URL_WORDS)
                self._in_url = True
            elif not final and _url_prefix(s[i:]):
                hold = i
                break
            else:
                if not (c == " " and (out[-1] if out else self._spoken) == " "):
                    out.append(c)
                i += 1
        if out:
            self._spoken = out[-1][-1]
        self._pending = "" if final else s[hold:]
        return "".join(out)


def _url_prefix(text: str) -> bool:
    """`text` could still grow into the start of a web address."""
    lower = text.lower()
    return any(p.startswith(lower) for p in _URL_PREFIXES)
