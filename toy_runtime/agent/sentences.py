"""Splits a streamed answer into speakable segments as early as possible.

Feed visible text deltas; get back whole sentences the moment they end, so TTS can start on the
first sentence while the model is still writing the rest. For the first segment of an answer a
clause may be cut early (after `, ; :` or `， ； ：`) once enough text is buffered, because the
time to the first spoken word matters more than prosody there.

A sentence ends at `. ! ? …`, at CJK `。 ！ ？`, or at a newline. To avoid cutting mid-sentence:

- `.`/`…` cut only when followed by whitespace (so "3.5", "example.com", "wait…what" stay whole),
  which means the splitter waits one character after a final period;
- not after abbreviations ("Mr.", "Dr.", "e.g.", "i.e.", …), single capital initials ("J. Smith")
  or a bare list number ("1. ");
- Latin `, ; :` count as clause cuts only before whitespace ("1,000" and "10:30" stay whole);
- runs of terminators and closing quotes/brackets stay with their sentence ('"Go!?" she said').

Pure and synchronous: no clock, no I/O. One splitter per answer, or call `flush()` between answers
(it ends the answer and re-arms the early first-clause cut).
"""

from __future__ import annotations

from ..language import is_dense

_LATIN_STOPS = ".!?…"
_CJK_STOPS = "。！？"
_CLOSERS = "\"')]}”’」』）》】"
_LATIN_CLAUSE = ",;:"
_CJK_CLAUSE = "，；："
_OPENERS = "\"'([{“‘「『（《【"
_RUN = _LATIN_STOPS + _CJK_STOPS + _CLOSERS
_LEADING_JUNK = _RUN + _LATIN_CLAUSE + _CJK_CLAUSE

ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "e.g", "i.e", "a.m", "p.m", "fig", "approx",
        "dept", "est", "inc", "ltd", "co", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
        "nov", "dec", "u.s", "u.k",
    }
)  # lower-case, without the final period; "etc" and "no" are left out: they usually end a sentence


def ends_sentence(text: str) -> bool:
    """True when `text` ends with a sentence stop (closing quotes and brackets after it allowed).

    A reply cut by the token limit is spoken only up to its last text for which this holds.
    """
    core = text.rstrip().rstrip(_CLOSERS)
    return bool(core) and core[-1] in _LATIN_STOPS + _CJK_STOPS


def _clean(segment: str) -> str:
    """Trim whitespace and punctuation left over from the previous cut; '' when nothing is speakable."""
    text = segment.strip().lstrip(_LEADING_JUNK).strip()
    return text if any(ch.isalnum() for ch in text) else ""


class SpeechSplitter:
    """Cuts streamed text into sentences, plus an early first clause for a fast first spoken word."""

    def __init__(self, *, first_clause_min_chars: int = 12, first_clause_min_chars_cjk: int = 6) -> None:
        """`first_clause_*`: text (before the clause mark) needed for an early first cut; 0 disables it."""
        self.first_clause_min_chars = first_clause_min_chars
        self.first_clause_min_chars_cjk = first_clause_min_chars_cjk
        self._buf = ""
        self._pos = 0  # next buffer offset to examine; everything before it is known not to end a segment
        self._emitted = False  # whether this answer already produced a segment

    @property
    def pending(self) -> str:
        """Text buffered but not yet returned."""
        return self._buf

    def feed(self, text: str) -> list[str]:
        """Add a visible-text delta; return the segments it completed, in order."""
        self._buf += text
        segments: list[str] = []
        while True:
            cut = self._next_cut()
            if cut is None:
                return segments
            segment = _clean(self._buf[:cut])
            self._buf, self._pos = self._buf[cut:], 0
            if segment:
                segments.append(segment)
                self._emitted = True

    def discard(self) -> str:
        """Drop the buffered text (a sentence that will not be spoken) and return it; the answer goes on."""
        text, self._buf, self._pos = self._buf, "", 0
        return text

    def flush(self) -> list[str]:
        """End of the answer: return the rest (if speakable) and reset for the next answer."""
        segment = _clean(self._buf)
        self._buf, self._pos, self._emitted = "", 0, False
        return [segment] if segment else []

    def _next_cut(self) -> int | None:
        """Offset just after the next segment boundary, or None until more text arrives."""
        buf = self._buf
        size = len(buf)
        i = self._pos
        while i < size:
            ch = buf[i]
            if ch == "\n":
                return i + 1
            if ch in _CJK_STOPS:
                return self._run_end(i)  # no lookahead: CJK has no space after a sentence
            if ch in _LATIN_STOPS:
                end = self._run_end(i)
                if end == size:
                    if ch in "!?":
                        return end  # "!"/"?" never sit inside a number or a word, so speak now
                    self._pos = i  # a period needs the next character to decide
                    return None
                if buf[end].isspace() and (ch in "!?" or self._period_ends_sentence(i)):
                    return end
                i = end
                continue
            if not self._emitted and (ch in _CJK_CLAUSE or ch in _LATIN_CLAUSE):
                cut = self._clause_cut(i)
                if cut == -1:
                    self._pos = i
                    return None
                if cut is not None:
                    return cut
            i += 1
        self._pos = size
        return None

    def _run_end(self, i: int) -> int:
        """End of the run of stops and closing quotes/brackets that starts at `i`."""
        buf = self._buf
        end = i + 1
        while end < len(buf) and buf[end] in _RUN:
            end += 1
        return end

    def _period_ends_sentence(self, i: int) -> bool:
        """False for the period of an abbreviation, an initial or a list number."""
        buf = self._buf
        start = i
        while start > 0 and not buf[start - 1].isspace():
            start -= 1
        word = buf[start:i].lstrip(_OPENERS)
        if not word:
            return True
        if word.lower() in ABBREVIATIONS:
            return False
        if len(word) == 1 and word.isalpha() and word.isupper():
            return False  # an initial: "J. Smith"
        if word.isdigit() and not buf[:start].strip():
            return False  # a list number at the start of a segment: "1. First"
        return True

    def _clause_cut(self, i: int) -> int | None:
        """Early first-clause cut after the clause mark at `i`; None = not here, -1 = need more text."""
        buf = self._buf
        ch = buf[i]
        if ch in _LATIN_CLAUSE and not (i > 0 and is_dense(buf[i - 1])):
            if i + 1 == len(buf):
                return -1
            if not buf[i + 1].isspace():
                return None  # "1,000", "10:30"
        head = buf[:i].strip()
        threshold = self.first_clause_min_chars_cjk if any(is_dense(c) for c in head) else self.first_clause_min_chars
        if threshold <= 0 or len(head) < threshold:
            return None
        return i + 1
