"""SearxngSearch against a real loopback HTTP server that behaves like SearxNG."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import httpx
import pytest

from toy_runtime.adapters.search_factory import make_search_provider
from toy_runtime.adapters.searxng import SNIPPET_CHARS, SearxngSearch, clean_text
from toy_runtime.fakes.clock import ManualClock
from toy_runtime.ports.search import SearchError, SearchResult
from toy_runtime.testing.fake_searxng import FakeSearxng

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


async def search(fake: FakeSearxng, query: str = "giant panda", max_results: int = 3, **kw) -> SearchResult:
    async with SearxngSearch(fake.url, clock=ManualClock(T0), **kw) as provider:
        return await provider.search(query, max_results=max_results)


async def test_results_trimmed_to_the_compact_contract(fake_searxng):
    result = await search(fake_searxng, max_results=3, language="en")
    assert result.query == "giant panda"
    assert result.provider == "searxng"
    assert result.retrieved_at == T0
    # The javascript: link in the fake's results is dropped; the three http(s) ones remain, in order.
    assert [h.url for h in result.hits] == [
        "https://en.wikipedia.org/wiki/Giant_panda",
        "https://www.worldwildlife.org/species/giant-panda",
        "https://nationalzoo.si.edu/animals/giant-panda",
    ]
    first = result.hits[0]
    assert first.title == "Giant panda - Wikipedia"
    assert "<" not in first.snippet and "&amp;" not in first.snippet and "coat & rotund" in first.snippet
    assert len(first.snippet) <= SNIPPET_CHARS and first.snippet.endswith("…")
    assert result.hits[1].snippet == "Pandas eat bamboo for up to 14 hours a day."
    assert result.as_dict()["evidence"][1]["title"] == "Giant Panda | Species | WWF"
    (params,) = fake_searxng.requests
    assert params == {"q": "giant panda", "format": "json", "safesearch": "1", "language": "en"}


async def test_max_results_respected(fake_searxng):
    result = await search(fake_searxng, max_results=1)
    assert len(result.hits) == 1


async def test_empty_results_are_not_an_error(fake_searxng):
    fake_searxng.set_mode("empty")
    result = await search(fake_searxng)
    assert result.hits == ()
    assert result.query == "giant panda"


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_slow_instance_is_a_transient_error_within_the_budget(fake_searxng):
    fake_searxng.set_mode("slow", delay_s=2.0)
    started = time.monotonic()
    with pytest.raises(SearchError) as info:
        await search(fake_searxng, timeout_s=0.3)
    assert time.monotonic() - started < 1.5  # generous bound: the budget is 0.3 s, the server would take 2 s
    assert info.value.transient
    assert fake_searxng.request_count == 1  # no retry inside the adapter


@pytest.mark.parametrize("mode", ["http_500", "http_429"])
async def test_server_busy_or_failing_is_transient(fake_searxng, mode):
    fake_searxng.set_mode(mode)
    with pytest.raises(SearchError) as info:
        await search(fake_searxng)
    assert info.value.transient
    assert fake_searxng.request_count == 1


@pytest.mark.parametrize("mode", ["malformed_json", "wrong_shape", "http_403"])
async def test_bad_answers_are_not_transient(fake_searxng, mode):
    fake_searxng.set_mode(mode)
    with pytest.raises(SearchError) as info:
        await search(fake_searxng)
    assert not info.value.transient


async def test_unreachable_instance_is_transient():
    with FakeSearxng() as fake:
        url = fake.url  # the port is free again once the server is stopped
    async with SearxngSearch(url, timeout_s=1.0) as provider:
        with pytest.raises(SearchError) as info:
            await provider.search("anything")
    assert info.value.transient


async def test_empty_query_is_refused_without_a_request(fake_searxng):
    with pytest.raises(SearchError) as info:
        await search(fake_searxng, query="   ")
    assert not info.value.transient
    assert fake_searxng.request_count == 0


async def test_custom_results_and_injected_client(fake_searxng):
    fake_searxng.set_mode(
        "results",
        results=[
            {"url": "https://a.example/x", "title": "", "content": "<p>one</p>"},
            {"url": "https://a.example/x", "title": "dup", "content": "same url twice"},
            "not a dict",
            {"title": "no url", "content": "dropped"},
            {"url": "https://b.example/", "title": "B", "content": None},
        ],
    )
    async with httpx.AsyncClient() as client:
        provider = SearxngSearch(fake_searxng.url + "/", client=client, safesearch=0)
        result = await provider.search("q", max_results=5)
        await provider.aclose()  # must not close a client it does not own
        assert not client.is_closed
    assert [(h.title, h.url, h.snippet) for h in result.hits] == [
        ("a.example", "https://a.example/x", "one"),
        ("B", "https://b.example/", ""),
    ]
    assert fake_searxng.requests[0]["safesearch"] == "0"


def test_clean_text():
    assert clean_text("<b>Hi</b>&nbsp;there\n\n you", 100) == "Hi there you"
    assert clean_text(None, 10) == ""
    cut = clean_text("word " * 100, 50)
    assert len(cut) <= 50 and cut.endswith("…") and not cut.endswith(" …")


async def test_factory(fake_searxng):
    provider = make_search_provider("searxng", base_url=fake_searxng.url, timeout_s=1.0)
    try:
        assert isinstance(provider, SearxngSearch)
        assert (await provider.search("panda", max_results=2)).hits
    finally:
        await provider.aclose()
    for kind in ("bing", "static"):  # the in-memory fake is never a factory product
        with pytest.raises(ValueError):
            make_search_provider(kind)
