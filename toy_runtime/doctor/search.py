"""The search check: is web search set up, and does the configured SearxNG answer a JSON query?"""

from __future__ import annotations

import time

from ..config import Settings
from .verdict import Verdict, fmt_ms, ok, warn

SEARXNG_HOWTO = (
    "run SearxNG (e.g. `docker run -d -p 8888:8080 searxng/searxng`), allow the JSON format in its settings.yml "
    "(`search: formats: [html, json]`), then set `[search] url = \"http://127.0.0.1:8888\"` in the profile "
    "(or TOY_SEARCH__URL)"
)


async def check_search(settings: Settings) -> Verdict:
    """WARN when search is off or canned; with `[search] url`, one real query (a failure is WARN: the toy still runs,
    and a look-up request then gets an honest "I couldn't look that up")."""
    search = settings.search
    if not search.url:
        if search.provider == "static":
            return warn("search answers with made-up example results (search.provider = \"static\"): for demos only",
                        SEARXNG_HOWTO)
        return warn("search is off: the model is not offered web search, and a look-up request gets "
                    "\"I can't look that up right now\"", SEARXNG_HOWTO)
    from ..adapters.searxng import SearxngSearch
    from ..ports.search import SearchError

    t0 = time.perf_counter()
    provider = SearxngSearch(search.url, timeout_s=search.timeout_s)
    try:
        result = await provider.search("weather", max_results=1)
    except SearchError as exc:
        return warn(f"SearxNG at {search.url} did not answer a search: {exc}",
                    "is it running and reachable from here, with the JSON format allowed (a 403 means it is not)? "
                    + SEARXNG_HOWTO)
    finally:
        await provider.aclose()
    took = (time.perf_counter() - t0) * 1000
    if not result.hits:
        return warn(f"SearxNG at {search.url} answers, but with no results ({fmt_ms(took)})",
                    "enable at least one working engine in its settings.yml")
    return ok(f"SearxNG at {search.url} answers in {fmt_ms(took)}")
