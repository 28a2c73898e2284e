"""The web-search port and its stable compact result contract."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..errors import ToyError


@dataclass(frozen=True)
class SearchHit:
    """One piece of evidence: a snippet with its source."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class SearchResult:
    """What every search provider returns: the compact contract the follow-up answer is built from."""

    query: str
    hits: tuple[SearchHit, ...]
    retrieved_at: datetime
    provider: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "evidence": [{"title": h.title, "url": h.url, "snippet": h.snippet} for h in self.hits],
            "retrieved_at": self.retrieved_at.isoformat(),
            "provider": self.provider,
        }


class SearchError(ToyError):
    """A search that failed; `transient` failures may be retried once (read-only)."""

    code = "search_failed"

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class SearchProvider(Protocol):
    """A web search backend."""

    async def search(self, query: str, max_results: int = 3) -> SearchResult: ...
