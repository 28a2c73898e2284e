"""A loopback aiohttp server that speaks Wikipedia's wire format: the action API's full-text search and the REST page
summary, for `{base}/{lang}/...` (the adapter's base URL is `{fake.url}/{lang}`).

Its fixtures have the documented shapes (mediawiki.org Specs/Summary: `type`, `title`, `titles`, `extract`,
`extract_html`, `description`, `content_urls`, `lang` …; API:Search with `formatversion=2`), so the adapter under
test cannot tell it from Wikipedia except by the answers it is told to give. Modes:

- "results"        the fixtures below: an English search finds a disambiguation page, two articles and a page that
                   is gone (404); a Chinese one finds one article
- "empty"          the search finds nothing
- "slow"           every answer waits `delay_s` first
- "http_500" / "http_429"   the search answers with that status
- "malformed_json" the search answers 200 with a body that is not JSON
- "api_error"      the action API's error object (HTTP 200, `{"error": {...}}`)
- "huge"           each summary is padded past the adapter's byte cap
- "redirect_away"  each summary redirects to another host

Usage:
    async with FakeWikipedia() as fake:
        WikipediaSearch(fake.base_url) ...
        fake.requests[-1]["path"], fake.requests[-1]["headers"]["User-Agent"]
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from aiohttp import web

MODES = ("results", "empty", "slow", "http_500", "http_429", "malformed_json", "api_error", "huge", "redirect_away")


def summary(lang: str, title: str, extract: str, *, kind: str = "standard", description: str = "",
            pageid: int = 1) -> dict[str, Any]:
    """A REST page summary in the documented shape (Specs/Summary 1.4)."""
    key = title.replace(" ", "_")
    page = f"https://{lang}.wikipedia.org/wiki/{key}"
    display = f'<span class="mw-page-title-main">{title}</span>'
    return {
        "type": kind,
        "title": title,
        "displaytitle": display,
        "namespace": {"id": 0, "text": ""},
        "wikibase_item": "Q15083",
        "titles": {"canonical": key, "normalized": title, "display": display},
        "pageid": pageid,
        "thumbnail": {"source": f"https://upload.wikimedia.org/wikipedia/commons/thumb/{key}.jpg/320px-{key}.jpg",
                      "width": 320, "height": 427},
        "lang": lang,
        "dir": "ltr",
        "revision": "1234567890",
        "tid": "5c2a3b10-0000-11ef-8000-000000000000",
        "timestamp": "2026-05-30T10:00:00Z",
        "description": description,
        "description_source": "local",
        "content_urls": {
            "desktop": {"page": page, "revisions": f"{page}?action=history", "edit": f"{page}?action=edit",
                        "talk": f"https://{lang}.wikipedia.org/wiki/Talk:{key}"},
            "mobile": {"page": f"https://{lang}.m.wikipedia.org/wiki/{key}",
                       "revisions": f"https://{lang}.m.wikipedia.org/wiki/Special:History/{key}",
                       "edit": f"https://{lang}.m.wikipedia.org/wiki/{key}?action=edit",
                       "talk": f"https://{lang}.m.wikipedia.org/wiki/Talk:{key}"},
        },
        "extract": extract,
        "extract_html": f"<p>{extract}</p>",
    }


GIRAFFE_EXTRACT = (
    "The giraffe is a large African hoofed mammal belonging to the genus Giraffa. It is the tallest living terrestrial "
    "animal and the largest ruminant on Earth. Adult males can be 5.7 metres tall. It is traditionally considered "
    "to be one species with nine subspecies."
)
PAGES: dict[str, dict[str, dict[str, Any]]] = {
    "en": {
        "Giraffe (disambiguation)": summary("en", "Giraffe (disambiguation)", "Giraffe may refer to:",
                                            kind="disambiguation", description="Topics referred to by the same term"),
        "Giraffe": summary("en", "Giraffe", GIRAFFE_EXTRACT, description="Tall African ungulate", pageid=12717),
        "Northern giraffe": summary(
            "en", "Northern giraffe", "The northern giraffe is the type species of giraffe. It is native to North Africa.",
            description="Species of giraffe", pageid=4512),
    },
    "zh": {
        "长颈鹿": summary("zh", "长颈鹿", "长颈鹿是一种生长在非洲的反刍偶蹄动物。它是世界上现存最高的陆生动物。雄性个体高达5.7米。",
                       description="非洲的一种有蹄类哺乳动物", pageid=7788),
    },
}
SEARCH_TITLES = {"en": ["Giraffe (disambiguation)", "Giraffe", "Missing page", "Northern giraffe"], "zh": ["长颈鹿"]}


class FakeWikipedia:
    """Wikipedia-like search + summary API on 127.0.0.1 (free port), served by aiohttp in the test's event loop."""

    def __init__(self, mode: str = "results", *, delay_s: float = 2.0) -> None:
        self.requests: list[dict[str, Any]] = []  # path, query parameters (first value each), headers
        self.pages = copy.deepcopy(PAGES)
        self.search_titles = copy.deepcopy(SEARCH_TITLES)
        self.set_mode(mode, delay_s=delay_s)
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._stopping: asyncio.Event | None = None

    def set_mode(self, mode: str, *, delay_s: float | None = None) -> None:
        """Change what the next requests get."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        self.mode = mode
        if delay_s is not None:
            self.delay_s = delay_s

    @property
    def url(self) -> str:
        """The server's root."""
        if self._runner is None:
            raise RuntimeError("FakeWikipedia is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        """What goes into `[search] wikipedia_url`: one site per language, like `https://{lang}.wikipedia.org`."""
        return self.url + "/{lang}"

    async def start(self) -> "FakeWikipedia":
        from aiohttp import web

        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_get("/{lang}/w/api.php", self._search)
        app.router.add_get("/{lang}/api/rest_v1/page/summary/{title}", self._summary)
        runner = self._runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._port = runner.addresses[0][1]  # port 0: the kernel picked a free one
        return self

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()  # releases handlers waiting in "slow"
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> "FakeWikipedia":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _wait(self) -> None:
        assert self._stopping is not None  # set by start(), before any request can arrive
        try:
            await asyncio.wait_for(self._stopping.wait(), self.delay_s)
        except TimeoutError:
            pass

    def _note(self, request) -> None:
        self.requests.append({"path": request.path, "query": dict(request.query), "headers": dict(request.headers)})

    async def _search(self, request):
        from aiohttp import web

        self._note(request)
        if self.mode == "slow":
            await self._wait()
        lang = request.match_info["lang"]
        if self.mode in ("http_500", "http_429"):
            return web.Response(status=int(self.mode[-3:]), text="busy")
        if self.mode == "malformed_json":
            return web.Response(status=200, content_type="application/json", text='{"query": {"search": [')
        if self.mode == "api_error":
            return web.json_response({"error": {"code": "nosrsearch", "info": "The \"srsearch\" parameter must be set.",
                                                "docref": "See https://en.wikipedia.org/w/api.php for API usage."},
                                      "servedby": "mw-api-ext.eqiad.main-1"})
        limit = int(request.query.get("srlimit", "10"))
        titles = [] if self.mode == "empty" else self.search_titles.get(lang, [])[:limit]
        return web.json_response({
            "batchcomplete": True,
            "continue": {"sroffset": len(titles), "continue": "-||"},
            "query": {"searchinfo": {"totalhits": len(titles)},
                      "search": [{"ns": 0, "title": t, "pageid": 1000 + i} for i, t in enumerate(titles)]},
        })

    async def _summary(self, request):
        from aiohttp import web

        self._note(request)
        if self.mode == "slow":
            await self._wait()
        if self.mode == "redirect_away":
            raise web.HTTPFound("http://198.51.100.7/elsewhere")
        lang, title = request.match_info["lang"], unquote(request.match_info["title"]).replace("_", " ")
        page = self.pages.get(lang, {}).get(title)
        if page is None:
            return web.json_response({"type": "https://mediawiki.org/wiki/HyperSwitch/errors/not_found",
                                      "title": "Not found.", "method": "get", "detail": "Page or revision not found.",
                                      "uri": f"/{lang}.wikipedia.org/v1/page/summary/{title}"}, status=404,
                                     content_type="application/problem+json")
        body = dict(page)
        if self.mode == "huge":
            body["extract_html"] = "<p>" + "x" * 400_000 + "</p>"
        return web.Response(text=json.dumps(body, ensure_ascii=False), content_type="application/json",
                            headers={"Content-Language": lang})
