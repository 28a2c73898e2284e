"""One SearchProvider contract, run against StaticSearch and SearxngSearch (over the loopback fake)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from toy_runtime.adapters.search_factory import make_search_provider
from toy_runtime.fakes.search import StaticSearch
from toy_runtime.fakes.clock import ManualClock

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["static", "searxng"])
async def provider(request, fake_searxng):
    if request.param == "searxng":
        p = make_search_provider("searxng", base_url=fake_searxng.url, clock=ManualClock(T0))
    else:  # the fake is constructed directly: no factory hands it out
        p = StaticSearch(clock=ManualClock(T0))
    try:
        yield p
    finally:
        if hasattr(p, "aclose"):
            await p.aclose()


@pytest.mark.parametrize("max_results", [1, 2, 3])
async def test_contract_compact_result(provider, max_results):
    result = await provider.search("giant panda", max_results=max_results)
    assert result.query == "giant panda"
    assert len(result.hits) == max_results
    assert result.retrieved_at == T0
    assert result.provider
    data = result.as_dict()
    assert set(data) == {"query", "evidence", "retrieved_at", "provider"}
    for item in data["evidence"]:
        assert item["url"].startswith(("http://", "https://"))
        assert item["title"]
        assert len(item["snippet"]) <= 300 and "<" not in item["snippet"]
