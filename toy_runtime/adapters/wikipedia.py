"""Keyless web search through Wikipedia: the MediaWiki search API finds pages, the REST page summary is the evidence.

One look-up is two steps on `{lang}.wikipedia.org` (English, or Chinese when the query has Chinese characters):
`/w/api.php?action=query&list=search` turns the question into a few page titles, then
`/api/rest_v1/page/summary/{title}` gives each page's plain-text `extract` (never its HTML). Only `standard` pages
are kept — a disambiguation page is a list of other pages, not a fact — and each extract is cut to its first
sentences: short evidence, written for a general audience, for a toy that talks to children.

Wikimedia asks every client for a User-Agent that names it and how to reach its maker (`[search] contact`). Every
request is bounded twice (httpx's per-read timeouts, and the whole look-up by `timeout_s`), every body by a byte cap,
and only 200 answers from the configured host count. Failures become SearchError: timeouts, connection errors,
429 and 5xx are transient (the kernel retries read-only events once; this adapter never retries itself).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..language import has_cjk
from ..ports.clock import Clock, SystemClock
from ..ports.search import SearchError, SearchHit, SearchResult
from .search_text import TITLE_CHARS, clean_text, http_url

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://{lang}.wikipedia.org"
PRODUCT = "toy-runtime/0.1.0"
EXTRACT_CHARS = 300  # the evidence per page: a short lead, not the article
EXTRACT_SENTENCES = 2
MAX_BODY_BYTES = 256 * 1024  # a summary is a few KB, a search answer less: anything bigger is not what we asked for
EXTRA_CANDIDATES = 2  # titles asked for beyond max_results, so a dropped disambiguation page does not cost a hit

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|(?<=[。！？])")


class PageNotFound(SearchError):
    """A summary asked for a page that is gone (HTTP 404): that page is skipped, the look-up goes on."""

    code = "page_not_found"


def user_agent(contact: str | None = None) -> str:
    """The User-Agent Wikimedia's policy asks for: the client's name and version, how to reach its maker, the library.

    `contact` is the owner's email or URL (`[search] contact`); without one the header still names the client."""
    who = contact or "a children's talking toy; no contact configured"
    return f"{PRODUCT} ({who}) httpx"


def language_of(query: str) -> str:
    """`zh` when the query has Chinese characters, else `en`: the Wikipedia a child's question is looked up in."""
    return "zh" if has_cjk(query) else "en"


def lead_sentences(text: str, *, sentences: int = EXTRACT_SENTENCES, limit: int = EXTRACT_CHARS) -> str:
    """The first `sentences` sentences of a plain-text extract, at most `limit` characters (cut at a word)."""
    plain = clean_text(text, 10 * limit)  # tags, entities and runs of spaces gone before counting sentences
    ends = [m.start() for m in _SENTENCE_END.finditer(plain) if 0 < m.start() < len(plain)]
    lead = plain[: ends[sentences - 1]] if len(ends) >= sentences else plain
    return clean_text(lead, limit)


class WikipediaSearch:
    """SearchProvider over Wikipedia's search and page-summary APIs (no key)."""

    provider = "wikipedia"

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        timeout_s: float = 2.5,
        client: httpx.AsyncClient | None = None,
        contact: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`base_url` may hold `{lang}` (replaced by `en` or `zh`); tests point it at a loopback server."""
        if not base_url:
            raise ValueError("Wikipedia base_url is empty (config [search] wikipedia_url)")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._clock = clock or SystemClock()
        self._user_agent = user_agent(contact)
        self._owns_client = client is None
        # httpx (and its TLS context) is made at the first look-up, not at start-up: the toy listens first
        self._client = client

    def _http(self) -> "httpx.AsyncClient":
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s),
                headers={"Accept": "application/json", "User-Agent": self._user_agent,
                         "Api-User-Agent": self._user_agent},
                follow_redirects=False,  # a redirect is answered by hand, to the same host only (_get_json)
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> "WikipediaSearch":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def site(self, lang: str) -> str:
        """The base URL of one language's Wikipedia."""
        return self.base_url.replace("{lang}", lang)

    async def search(self, query: str, max_results: int = 3) -> SearchResult:
        """One look-up; at most `max_results` page summaries (>= 1). Raises SearchError."""
        query = (query or "").strip()
        if not query:
            raise SearchError("empty search query", transient=False)
        import httpx

        limit = max(1, int(max_results))
        lang = language_of(query)
        try:
            # One bound for the whole look-up: two round trips must not each take the full budget.
            async with asyncio.timeout(self.timeout_s):
                titles = await self._titles(lang, query, limit + EXTRA_CANDIDATES)
                hits = await self._summaries(lang, titles, limit)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise SearchError(f"search timed out after {self.timeout_s:g} s", transient=True) from exc
        except httpx.TransportError as exc:
            raise SearchError(f"search service unreachable: {type(exc).__name__}", transient=True) from exc
        return SearchResult(query=query, hits=tuple(hits), retrieved_at=self._clock.now(), provider=self.provider)

    async def _titles(self, lang: str, query: str, count: int) -> list[str]:
        params = {"action": "query", "list": "search", "srsearch": query, "srnamespace": 0, "srlimit": count,
                  "srprop": "", "srinfo": "", "format": "json", "formatversion": 2, "utf8": 1}
        payload = await self._get_json(f"{self.site(lang)}/w/api.php", params, lang)
        if not isinstance(payload, dict):
            raise SearchError("search service returned an unexpected shape (not an object)")
        if isinstance(payload.get("error"), dict):  # the action API reports errors with HTTP 200
            raise SearchError(f"search service refused the query ({payload['error'].get('code', 'error')})")
        found = (payload.get("query") or {}).get("search") if isinstance(payload.get("query"), dict) else None
        if not isinstance(found, list):
            raise SearchError("search service returned an unexpected shape (no query.search list)")
        titles = [item["title"] for item in found
                  if isinstance(item, dict) and isinstance(item.get("title"), str) and item.get("ns", 0) == 0]
        # a MediaWiki title is at most 255 bytes: anything longer is not a page name and never becomes a URL path
        titles = [t.strip() for t in titles if t.strip() and len(t.encode()) <= 255]
        return list(dict.fromkeys(titles))[:count]

    async def _summaries(self, lang: str, titles: list[str], limit: int) -> list[SearchHit]:
        if not titles:
            return []
        try:
            async with asyncio.TaskGroup() as group:  # the summaries in parallel: one round trip, not one per page
                tasks = [group.create_task(self._summary(lang, title), name=f"wikipedia-summary-{i}")
                         for i, title in enumerate(titles)]
        except ExceptionGroup as failed:  # the others were cancelled; the first failure says what went wrong
            raise failed.exceptions[0] from None
        hits = [hit for task in tasks if (hit := task.result()) is not None]  # search order kept
        seen: set[str] = set()
        unique: list[SearchHit] = []
        for h in hits:
            if h.url not in seen:
                seen.add(h.url)
                unique.append(h)
        return unique[:limit]

    async def _summary(self, lang: str, title: str) -> SearchHit | None:
        path = quote(title.replace(" ", "_"), safe="")
        try:
            payload = await self._get_json(f"{self.site(lang)}/api/rest_v1/page/summary/{path}", None, lang)
        except PageNotFound:
            return None  # deleted or renamed since the search index saw it: one page fewer, not a failure
        return summary_hit(payload, lang)

    async def _get_json(self, url: str, params: dict[str, Any] | None, lang: str, *, hops: int = 2) -> Any:
        headers = {"Accept-Language": "zh-cn"} if lang == "zh" else {}  # simplified characters for a zh child
        import httpx

        async with self._http().stream("GET", url, params=params, headers=headers) as response:
            code = response.status_code
            if code in (301, 302, 303, 307, 308) and hops > 0:
                target = response.next_request.url if response.next_request else None
                if target is None or target.host != httpx.URL(url).host:
                    raise SearchError(f"search service redirected off its host (HTTP {code})")
                return await self._get_json(str(target), None, lang, hops=hops - 1)
            if code == 404:
                raise PageNotFound("page not found (HTTP 404)")
            if code == 429 or code >= 500:
                raise SearchError(f"search service busy or failing (HTTP {code})", transient=True)
            if code != 200:
                raise SearchError(f"search service answered HTTP {code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise SearchError(f"search service answer larger than {MAX_BODY_BYTES} bytes")
        try:
            return json.loads(bytes(body))
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
            raise SearchError("search service returned malformed JSON") from exc


def _page_url(payload: dict[str, Any]) -> str | None:
    urls = payload.get("content_urls")
    desktop = urls.get("desktop") if isinstance(urls, dict) else None
    return http_url(desktop.get("page")) if isinstance(desktop, dict) else None


def summary_hit(payload: Any, lang: str = "en") -> SearchHit | None:
    """A page summary as evidence: its title, its page URL and the first sentences of its plain-text `extract`.

    None for anything but an ordinary article with text: disambiguation pages, the main page, pages without an
    extract, or a shape that is not a summary.
    """
    if not isinstance(payload, dict) or payload.get("type") != "standard":
        return None
    extract = lead_sentences(payload.get("extract") or "")
    url = _page_url(payload)
    title = clean_text(payload.get("title"), TITLE_CHARS)
    if not extract or url is None or not title:
        return None
    return SearchHit(title=f"{title} - Wikipedia" if lang != "zh" else f"{title} - 维基百科", url=url,
                     snippet=extract)
