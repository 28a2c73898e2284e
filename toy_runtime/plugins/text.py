"""Small text helpers shared by the built-in resolvers."""

from __future__ import annotations

import re

from ..language import WIDE_CHARS, has_cjk

_SPACE_NEAR_CJK = re.compile(rf"(?<={WIDE_CHARS})\s+|\s+(?={WIDE_CHARS})")


def collapse_spaces(text: str) -> str:
    """Trim and collapse runs of whitespace; drop spaces next to Chinese characters and punctuation."""
    return _SPACE_NEAR_CJK.sub("", " ".join(text.split()))


def blank_spans(text: str, spans) -> str:
    """`text` with each [start, end) span replaced by spaces (positions stay valid for later spans)."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def wants_chinese(utterance: str | None, locale: str = "en") -> bool:
    """Reply in Chinese when the user spoke Chinese, or when there are no words and the locale is Chinese."""
    if utterance and utterance.strip():
        return has_cjk(utterance)
    return locale.lower().startswith("zh")
