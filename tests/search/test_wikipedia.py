"""WikipediaSearch against a loopback server that speaks Wikipedia's search and page-summary wire format."""

from __future__ import annotations

import socket
import time
from datetime import datetime, timezone

import pytest

from toy_runtime.adapters.search_factory import make_search_provider
from toy_runtime.adapters.wikipedia import EXTRACT_CHARS, WikipediaSearch, language_of, lead_sentences
from toy_runtime.fakes.clock import ManualClock
from toy_runtime.ports.search import SearchError, SearchResult
from toy_runtime.testing.fake_wikipedia import FakeWikipedia

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
async def wiki():
    async with FakeWikipedia() as fake:
        yield fake


async def look_up(fake: FakeWikipedia, query: str = "how tall giraffes are", max_results: int = 3,
                  **kw) -> SearchResult:
    async with WikipediaSearch(fake.base_url, clock=ManualClock(T0), **kw) as provider:
        return await provider.search(query, max_results=max_results)


async def test_summaries_of_standard_pages_are_the_evidence(wiki):
    result = await look_up(wiki)
    assert result.provider == "wikipedia" and result.query == "how tall giraffes are" and result.retrieved_at == T0
    # the disambiguation page is dropped, the page that is gone (404) skipped, search order kept
    assert [h.url for h in result.hits] == ["https://en.wikipedia.org/wiki/Giraffe",
                                            "https://en.wikipedia.org/wiki/Northern_giraffe"]
    giraffe = result.hits[0]
    assert giraffe.title == "Giraffe - Wikipedia"
    # the plain-text extract, cut to its first two sentences; never the HTML
    assert giraffe.snippet == ("The giraffe is a large African hoofed mammal belonging to the genus Giraffa. It is the "
                               "tallest living terrestrial animal and the largest ruminant on Earth.")
    assert "<" not in giraffe.snippet
    search, *summaries = wiki.requests
    assert search["path"] == "/en/w/api.php"
    assert search["query"]["action"] == "query" and search["query"]["list"] == "search"
    assert search["query"]["srsearch"] == "how tall giraffes are" and search["query"]["srlimit"] == "5"
    assert sorted(r["path"] for r in summaries) == sorted(
        f"/en/api/rest_v1/page/summary/{t}" for t in ("Giraffe_(disambiguation)", "Giraffe", "Missing_page",
                                                       "Northern_giraffe"))
    for request in wiki.requests:  # Wikimedia's policy: a User-Agent that names the client
        assert request["headers"]["User-Agent"].startswith("toy-runtime/")


async def test_the_user_agent_names_the_owner_when_configured(wiki, tmp_path):
    from toy_runtime.app.runtime import build_search
    from toy_runtime.config import ConfigError, load_settings

    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path), "TOY_SEARCH__WIKIPEDIA_URL": wiki.base_url,
                                  "TOY_SEARCH__CONTACT": "toys@example.org"})
    search = build_search(settings)
    try:
        await search.search("giraffe", max_results=1)
    finally:
        await search.aclose()
    agent = wiki.requests[0]["headers"]["User-Agent"]
    assert agent.startswith("toy-runtime/") and "(toys@example.org)" in agent and agent.endswith("httpx")
    with pytest.raises(ConfigError, match="search.contact"):  # it goes into a header: one printable line
        load_settings(env={"TOY_STATE_DIR": str(tmp_path), "TOY_SEARCH__CONTACT": "me\r\nX-Evil: 1"})


async def test_a_chinese_question_is_looked_up_in_the_chinese_wikipedia(wiki):
    result = await look_up(wiki, "长颈鹿有多高")
    [hit] = result.hits
    assert hit.url == "https://zh.wikipedia.org/wiki/长颈鹿" and hit.title == "长颈鹿 - 维基百科"
    assert hit.snippet == "长颈鹿是一种生长在非洲的反刍偶蹄动物。它是世界上现存最高的陆生动物。"
    assert {r["path"].split("/")[1] for r in wiki.requests} == {"zh"}
    assert all(r["headers"].get("Accept-Language") == "zh-cn" for r in wiki.requests)  # simplified characters


async def test_a_title_no_page_could_have_is_never_asked_for(wiki):
    wiki.search_titles["en"] = ["x" * 300, "Giraffe"]  # a hostile or broken search answer
    result = await look_up(wiki)
    assert [h.title for h in result.hits] == ["Giraffe - Wikipedia"]
    assert [r["path"] for r in wiki.requests[1:]] == ["/en/api/rest_v1/page/summary/Giraffe"]


async def test_max_results_is_respected(wiki):
    assert len((await look_up(wiki, max_results=1)).hits) == 1


async def test_nothing_found_is_not_an_error(wiki):
    wiki.set_mode("empty")
    result = await look_up(wiki)
    assert result.hits == () and len(wiki.requests) == 1  # no summary asked for


@pytest.mark.parametrize("mode", ["http_500", "http_429"])
async def test_busy_or_failing_is_transient(wiki, mode):
    wiki.set_mode(mode)
    with pytest.raises(SearchError) as info:
        await look_up(wiki)
    assert info.value.transient and len(wiki.requests) == 1  # no retry inside the adapter


@pytest.mark.parametrize("mode", ["malformed_json", "api_error", "huge", "redirect_away"])
async def test_bad_answers_are_not_transient(wiki, mode):
    wiki.set_mode(mode)
    with pytest.raises(SearchError) as info:
        await look_up(wiki)
    assert not info.value.transient
    assert all(r["path"].startswith(("/en/", "/zh/")) for r in wiki.requests)  # nothing followed off the host


@pytest.mark.slow  # real waits
async def test_a_slow_wikipedia_is_a_transient_error_within_the_budget(wiki):
    wiki.set_mode("slow", delay_s=5.0)
    started = time.monotonic()
    with pytest.raises(SearchError) as info:
        await look_up(wiki, timeout_s=0.3)
    assert time.monotonic() - started < 3.0  # safety bound only: the budget is 0.3 s, the server would take 5 s
    assert info.value.transient


async def test_unreachable_is_transient():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again at once: nothing listens there
    async with WikipediaSearch(f"http://127.0.0.1:{port}/{{lang}}", timeout_s=2.0) as provider:
        with pytest.raises(SearchError) as info:
            await provider.search("giraffe")
    assert info.value.transient


async def test_empty_query_is_refused_without_a_request(wiki):
    with pytest.raises(SearchError):
        await look_up(wiki, query="  ")
    assert wiki.requests == []


def test_language_and_lead_sentences():
    assert language_of("how tall is a giraffe") == "en" and language_of("长颈鹿 giraffe") == "zh"
    assert lead_sentences("One. Two! Three?") == "One. Two!"
    assert lead_sentences("第一句。第二句。第三句。") == "第一句。第二句。"
    long = lead_sentences("word " * 200)
    assert len(long) <= EXTRACT_CHARS and long.endswith("…")


async def test_the_factory_builds_it(wiki):
    provider = make_search_provider("wikipedia", base_url=wiki.base_url, timeout_s=2.0)
    try:
        assert isinstance(provider, WikipediaSearch)
        assert (await provider.search("giraffe", max_results=1)).hits
    finally:
        await provider.aclose()


def _online() -> bool:
    try:
        socket.create_connection(("en.wikipedia.org", 443), timeout=2).close()
        return True
    except OSError:
        return False


@pytest.mark.slow  # the real Wikipedia over the network: outside the fast lane, skipped without network
async def test_live_wikipedia_answers_a_child_question():
    if not _online():
        pytest.skip("no network: en.wikipedia.org:443 unreachable")
    async with WikipediaSearch(timeout_s=10.0) as provider:
        try:
            result = await provider.search("how tall are giraffes", max_results=2)
            zh = await provider.search("长颈鹿", max_results=1)
        except SearchError as exc:
            if exc.transient:  # Wikipedia busy or the link flaky: not this code's failure
                pytest.skip(f"Wikipedia did not answer: {exc}")
            raise
    assert result.hits and any("giraffe" in h.snippet.lower() for h in result.hits)
    assert all(h.url.startswith("https://en.wikipedia.org/wiki/") and len(h.snippet) <= EXTRACT_CHARS
               for h in result.hits)
    assert zh.hits and zh.hits[0].url.startswith("https://zh.wikipedia.org/") and "长颈鹿" in zh.hits[0].snippet
