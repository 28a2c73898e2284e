"""Web search through a SearxNG instance's JSON API (GET {base}/search?q=...&format=json).

The instance must allow the json format (settings.yml: `search: formats: [html, json]`), otherwise it answers 403.
Results are untrusted text: they are trimmed to the compact contract (title, url, a short tag-free snippet) and carry
no structure the runtime could act on.

Failures become SearchError. Timeouts, connection errors, 429 and 5xx are transient — the kernel retries read-only
events once, so this adapter never retries itself; other 4xx, malformed JSON and unexpected shapes are not.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..ports.clock import Clock, SystemClock
from ..ports.search import SearchError, SearchHit, SearchResult
from .search_text import SNIPPET_CHARS, TITLE_CHARS, clean_text, http_url as _http_url  # noqa: F401 - re-exported


class SearxngSearch:
    """SearchProvider for one SearxNG base URL."""

    provider = "searxng"

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 2.5,
        client: httpx.AsyncClient | None = None,
        language: str | None = None,
        safesearch: int = 1,
        clock: Clock | None = None,
    ) -> None:
        if not base_url:
            raise ValueError("SearxNG base_url is empty (config [search] url / TOY_SEARCH__URL)")
        if safesearch not in (0, 1, 2):
            raise ValueError("safesearch must be 0, 1 or 2")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.language = language
        self.safesearch = safesearch
        self._clock = clock or SystemClock()
        self._owns_client = client is None
        # connect/read/write/pool each bounded by the budget; the whole call is bounded again in search().
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s),
            headers={"Accept": "application/json", "User-Agent": "toy-runtime/0.1 (+searxng adapter)"},
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> "SearxngSearch":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def search(self, query: str, max_results: int = 3) -> SearchResult:
        """One search; at most `max_results` hits (>= 1). Raises SearchError."""
        query = (query or "").strip()
        if not query:
            raise SearchError("empty search query", transient=False)
        limit = max(1, int(max_results))
        params: dict[str, Any] = {"q": query, "format": "json", "safesearch": self.safesearch}
        if self.language:
            params["language"] = self.language
        url = f"{self.base_url}/search"
        try:
            # The total bound matters: httpx's read timeout is per read, a server trickling bytes would outlast it.
            async with asyncio.timeout(self.timeout_s):
                response = await self._client.get(url, params=params, timeout=httpx.Timeout(self.timeout_s))
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise SearchError(f"search timed out after {self.timeout_s:g} s", transient=True) from exc
        except httpx.TransportError as exc:
            raise SearchError(f"search service unreachable: {type(exc).__name__}", transient=True) from exc
        retrieved_at = self._clock.now()
        self._check_status(response)
        hits = self._hits(response, limit)
        return SearchResult(query=query, hits=tuple(hits), retrieved_at=retrieved_at, provider=self.provider)

    @staticmethod
    def _check_status(response: httpx.Response) -> None:
        code = response.status_code
        if code == 429 or code >= 500:
            raise SearchError(f"search service busy or failing (HTTP {code})", transient=True)
        if code == 403:
            raise SearchError("search service refused (HTTP 403); is the json format enabled in SearxNG?")
        if code != 200:
            raise SearchError(f"search service answered HTTP {code}")

    @staticmethod
    def _hits(response: httpx.Response, limit: int) -> list[SearchHit]:
        try:
            payload = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
            raise SearchError("search service returned malformed JSON") from exc
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise SearchError("search service returned an unexpected shape (no results list)")
        hits: list[SearchHit] = []
        seen: set[str] = set()
        for item in results:
            if not isinstance(item, dict):
                continue
            url = _http_url(item.get("url"))
            if url is None or url in seen:
                continue
            snippet = clean_text(item.get("content"), SNIPPET_CHARS)
            title = clean_text(item.get("title"), TITLE_CHARS) or urlsplit(url).netloc
            seen.add(url)
            hits.append(SearchHit(title=title, url=url, snippet=snippet))
            if len(hits) >= limit:
                break
        return hits
