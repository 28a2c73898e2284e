"""Builds a real search adapter by kind; the one place that maps a provider name to a search adapter class.

Fakes never come from here: only the composition root (toy_runtime.app.runtime) may choose the in-memory StaticSearch.
"""

from __future__ import annotations

from typing import Any

from ..ports.search import SearchProvider

KINDS = ("wikipedia", "searxng")


def make_search_provider(kind: str, **kwargs: Any) -> SearchProvider:
    """`wikipedia` → WikipediaSearch(base_url=..., timeout_s=...); `searxng` → SearxngSearch(base_url=..., ...).

    Other real providers (a hosted API, a local index) join here behind the same port.
    """
    kind = (kind or "").strip().lower()
    if kind == "wikipedia":
        from .wikipedia import WikipediaSearch

        return WikipediaSearch(**kwargs)
    if kind == "searxng":
        from .searxng import SearxngSearch

        return SearxngSearch(**kwargs)
    raise ValueError(f"unknown search provider {kind!r}; expected one of {', '.join(KINDS)}")
