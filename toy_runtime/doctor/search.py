"""The search check: is web search set up, and does the configured provider (Wikipedia, SearxNG) answer a query?"""

from __future__ import annotations

import time

from ..config import Settings
from .verdict import Verdict, fmt_ms, ok, warn

SEARXNG_HOWTO = (
    "run SearxNG (e.g. `docker run -d -p 8888:8080 searxng/searxng`), allow the JSON format in its settings.yml "
    "(`search: formats: [html, json]`), then set `[search] url = \"http://127.0.0.1:8888\"` in the profile "
    "(or TOY_SEARCH__URL)"
)
WIKIPEDIA_HOWTO = ("search needs the toy online (HTTPS to wikipedia.org); or set `[search] provider = \"none\"` "
                   "for an honest \"I can't look that up\", or `url` for a SearxNG instance")


async def check_search(settings: Settings) -> Verdict:
    """WARN when search is off or canned; with a real provider, one real query (a failure is WARN: the toy still
    runs, and a look-up request then gets an honest "I couldn't look that up")."""
    search = settings.search
    if search.url:
        from ..adapters.searxng import SearxngSearch

        return await _probe(SearxngSearch(search.url, timeout_s=search.timeout_s), f"SearxNG at {search.url}",
                            "is it running and reachable from here, with the JSON format allowed (a 403 means it is "
                            "not)? " + SEARXNG_HOWTO, "enable at least one working engine in its settings.yml")
    if search.provider == "wikipedia":
        from ..adapters.wikipedia import WikipediaSearch

        site = search.wikipedia_url.replace("{lang}", "en")
        provider = WikipediaSearch(search.wikipedia_url, timeout_s=search.timeout_s, contact=search.contact)
        return await _probe(provider, f"Wikipedia at {site}", WIKIPEDIA_HOWTO, "check `[search] wikipedia_url`")
    if search.provider == "static":
        return warn("search answers with made-up example results (search.provider = \"static\"): for demos only",
                    SEARXNG_HOWTO)
    return warn("search is off: the model is not offered web search, and a look-up request gets "
                "\"I can't look that up right now\"",
                "remove `[search] provider = \"none\"` for Wikipedia (no key), or " + SEARXNG_HOWTO)


async def _probe(provider, name: str, unreachable_fix: str, empty_fix: str) -> Verdict:
    """One real query through the adapter the runtime would use."""
    from ..ports.search import SearchError

    t0 = time.perf_counter()
    try:
        result = await provider.search("giraffe", max_results=1)
    except SearchError as exc:
        return warn(f"{name} did not answer a search: {exc}", unreachable_fix)
    finally:
        await provider.aclose()
    took = (time.perf_counter() - t0) * 1000
    if not result.hits:
        return warn(f"{name} answers, but with no results ({fmt_ms(took)})", empty_fix)
    return ok(f"{name} answers in {fmt_ms(took)}")
