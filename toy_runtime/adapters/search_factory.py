"""Builds the configured search provider by kind; the one place that maps a config value to a search adapter."""

from __future__ import annotations

from typing import Any

from ..ports.search import SearchProvider

KINDS = ("searxng", "static")


def make_search_provider(kind: str, **kwargs: Any) -> SearchProvider:
    """`searxng` → SearxngSearch(base_url=..., timeout_s=..., ...); `static` → the in-memory StaticSearch(**kwargs).

    Other providers (a hosted API, a local index) join here behind the same port.
    """
    kind = (kind or "").strip().lower()
    if kind == "searxng":
        from .searxng import SearxngSearch

        return SearxngSearch(**kwargs)
    if kind == "static":
        # Imported lazily: the fake lives in toy_runtime.fakes and production start-up should not need it.
        from ..fakes.search import StaticSearch

        return StaticSearch(**kwargs)
    raise ValueError(f"unknown search provider {kind!r}; expected one of {', '.join(KINDS)}")
