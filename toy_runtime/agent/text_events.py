"""Incremental parser for the dual_agent text-event protocol.

ChatAgent streams its visible reply and appends the events it wants in a hidden block:

    Sure, turning it down.<agent_events>device.volume.adjust</agent_events>

`TextEventParser` is fed content deltas as they arrive and returns, in order,
`Visible` text for the user and an `EventBlock` the moment a block closes, so events can be
dispatched before the reply ends. Nothing inside a block is ever visible, even if the block never
closes. Text is held back only while it could still be the start of a marker, so a stray `<`
("3 < 5", "<b>") is released as soon as the next character rules the marker out.

Markers are matched ASCII-case-insensitively. A stray closing marker outside a block is dropped
(it is markup, never speech). Validating names against the registry is the caller's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN_MARKER = "<agent_events>"
CLOSE_MARKER = "</agent_events>"

_CLOSE_RE = re.compile(re.escape(CLOSE_MARKER), re.IGNORECASE | re.ASCII)
# Outside a block either marker may start; a stray close marker is hidden too.
_ANY_MARKER_RE = re.compile(f"{re.escape(OPEN_MARKER)}|{re.escape(CLOSE_MARKER)}", re.IGNORECASE | re.ASCII)
_LONGEST_MARKER = max(len(OPEN_MARKER), len(CLOSE_MARKER))

# Names are separated by commas, semicolons, pipes or any whitespace (newlines included).
_NAME_SEPARATORS = re.compile(r"[\s,;|]+")
# Decoration a model may wrap names in: quotes, brackets, list bullets, call parentheses, a final period.
_NAME_DECORATION = "\"'`()[]{}<>*•-.:"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True, slots=True)
class Visible:
    """User-visible reply text, in stream order."""

    text: str


@dataclass(frozen=True, slots=True)
class EventBlock:
    """A closed `<agent_events>` block: the raw names inside it (unvalidated) and its raw body."""

    names: tuple[str, ...]
    raw: str


@dataclass(frozen=True, slots=True)
class UnclosedBlock:
    """A block that was opened but never closed before the stream ended; none of it was shown."""

    raw: str

    @property
    def names(self) -> tuple[str, ...]:
        """Names found in the partial body; whether to act on them is the caller's policy."""
        return parse_names(self.raw)


Item = Visible | EventBlock | UnclosedBlock


def parse_names(block_text: str) -> tuple[str, ...]:
    """Split a block body into raw event names, in order (duplicates kept).

    Accepts namespaced names (`device.volume.adjust`) and provider tool names (`device_volume_adjust`)
    separated by commas, semicolons, pipes, newlines or spaces; strips quotes, brackets, bullets and a
    trailing `()` or period. Unknown names are returned as they are for the caller to audit.
    """
    names: list[str] = []
    for token in _NAME_SEPARATORS.split(block_text):
        name = token.strip(_NAME_DECORATION)
        if name:
            names.append(name)
    return tuple(names)


def _held_suffix(text: str) -> int:
    """Start of the shortest tail of `text` that may still grow into a marker, or len(text) if none.

    Each marker holds exactly one `<` (its first character), so only the last `<` within reach of
    the longest marker can start a prefix.
    """
    start = text.rfind("<", max(0, len(text) - _LONGEST_MARKER + 1))
    if start < 0:
        return len(text)
    tail = text[start:].translate(_ASCII_LOWER)
    if OPEN_MARKER.startswith(tail) or CLOSE_MARKER.startswith(tail):
        return start
    return len(text)


class TextEventParser:
    """Streams visible text and hidden event blocks out of content deltas.

    Use one parser per model response: `feed()` every delta, then `close()` once. At most
    `len(CLOSE_MARKER) - 1` characters are ever held back outside a block.
    """

    def __init__(self) -> None:
        self._pending = ""  # outside a block: a tail that may still become a marker
        self._block: str | None = None  # inside a block: its body so far
        self._searched = 0  # inside a block: body offset already scanned for the close marker

    @property
    def in_block(self) -> bool:
        """True while an opened block has not closed yet."""
        return self._block is not None

    @property
    def held(self) -> str:
        """Text held back outside a block because it may be the start of a marker."""
        return self._pending

    def feed(self, chunk: str) -> list[Item]:
        """Consume one content delta; return the items it completed, in order."""
        items: list[Item] = []
        text = chunk
        # Each pass consumes one marker (or ends the loop), so several blocks in one delta are fine.
        while text:
            text = self._outside(self._pending + text, items) if self._block is None else self._inside(text, items)
        return items

    def close(self) -> list[Item]:
        """End of stream: release held text, or report a block that never closed. Resets the parser."""
        items: list[Item] = []
        if self._block is not None:
            items.append(UnclosedBlock(self._block))
        elif self._pending:
            items.append(Visible(self._pending))
        self._pending, self._block, self._searched = "", None, 0
        return items

    def _outside(self, text: str, items: list[Item]) -> str:
        """Handle text outside a block; return what follows a marker (to process next), else ""."""
        self._pending = ""
        if "<" not in text:  # fast path: the common delta holds no markup at all
            items.append(Visible(text))
            return ""
        match = _ANY_MARKER_RE.search(text)
        if match is None:
            cut = _held_suffix(text)
            if cut:
                items.append(Visible(text[:cut]))
            self._pending = text[cut:]
            return ""
        if match.start():
            items.append(Visible(text[: match.start()]))
        if match.group(0)[1] != "/":  # an open marker; a stray close marker is simply hidden
            self._block, self._searched = "", 0
        return text[match.end() :]

    def _inside(self, chunk: str, items: list[Item]) -> str:
        """Handle text inside a block; return what follows its close marker, else ""."""
        assert self._block is not None
        body = self._block + chunk
        # Resume just before the previous end so a marker split across deltas is still found.
        match = _CLOSE_RE.search(body, max(0, self._searched - len(CLOSE_MARKER) + 1))
        if match is None:
            self._block, self._searched = body, len(body)
            return ""
        raw = body[: match.start()]
        items.append(EventBlock(parse_names(raw), raw))
        self._block, self._searched = None, 0
        return body[match.end() :]
