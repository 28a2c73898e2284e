"""Search results are untrusted text: the helpers that make them plain, short and web-only (no HTTP library here,
so importing them costs nothing at start-up)."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlsplit

SNIPPET_CHARS = 300
TITLE_CHARS = 120

_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def clean_text(text: Any, limit: int) -> str:
    """Strip HTML tags and entities, collapse whitespace, cut at a word boundary to at most `limit` chars."""
    if not isinstance(text, str):
        return ""
    plain = _SPACE.sub(" ", html.unescape(_TAG.sub(" ", text))).strip()
    if len(plain) <= limit:
        return plain
    cut = plain[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:  # prefer a word boundary unless it throws away too much
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def http_url(value: Any) -> str | None:
    """The URL when it is an http(s) link with a host, else None."""
    # Only web links travel on: a javascript: or data: URL in a result is dropped.
    if not isinstance(value, str):
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return value.strip()
