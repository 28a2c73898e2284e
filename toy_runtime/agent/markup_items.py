"""What the markup stages return: text that may be spoken, and what was hidden from speech."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Text:
    """Text that survived the filter (it still goes through the sentence splitter and the name check)."""

    text: str


@dataclass(frozen=True, slots=True)
class Hidden:
    """Something removed from speech: its kind, the raw text, and JSON values found in it (for recovery)."""

    kind: str  # markdown | emoji | tag | script | markup | entity | tool_call | event_block | reasoning | json | ...
    raw: str
    values: tuple[Any, ...] = field(default=())
    unclosed: bool = False  # the stream ended inside it
