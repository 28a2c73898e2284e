"""An in-memory SearchProvider with canned results, delays and failure modes.

Never a production default: `[search] provider = "static"` is an explicit demo/laptop choice, and the generated
results say they are made-up examples, so a follow-up built from them cannot pass them off as real.
"""

from __future__ import annotations

import asyncio
import re
from typing import Iterable, Mapping, Sequence

from ..ports.clock import Clock, SystemClock
from ..ports.search import SearchError, SearchHit, SearchResult


class StaticSearch:
    """Canned search: no network, deterministic results, counted calls.

    - `answers` maps a lower-cased query (exact match) to its hits; other queries get generated example.org hits
      whose titles and snippets say they are examples, not real facts.
    - `delay_s` sleeps before answering (to exercise timeouts).
    - `failures` are raised one per call, in order, before normal answers resume
      (e.g. [SearchError("503", transient=True)] fails the first call only); `fail_always` raises on every call.
    """

    def __init__(
        self,
        answers: Mapping[str, Sequence[SearchHit]] | None = None,
        *,
        delay_s: float = 0.0,
        failures: Iterable[SearchError] = (),
        fail_always: SearchError | None = None,
        clock: Clock | None = None,
        provider: str = "static",
    ) -> None:
        self.answers = {k.strip().lower(): tuple(v) for k, v in (answers or {}).items()}
        self.delay_s = delay_s
        self.failures = list(failures)
        self.fail_always = fail_always
        self.clock = clock or SystemClock()
        self.provider = provider
        self.calls: list[tuple[str, int]] = []

    @property
    def call_count(self) -> int:
        """How many searches were attempted (failed ones included)."""
        return len(self.calls)

    async def search(self, query: str, max_results: int = 3) -> SearchResult:
        """Answer `query` with at most `max_results` hits, after the configured delay/failures."""
        self.calls.append((query, max_results))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_always is not None:
            raise self.fail_always
        if self.failures:
            raise self.failures.pop(0)
        hits = self.answers.get(query.strip().lower())
        if hits is None:
            hits = self._generated(query)
        return SearchResult(query=query, hits=tuple(hits[:max_results]), retrieved_at=self.clock.now(),
                            provider=self.provider)

    @staticmethod
    def _generated(query: str) -> tuple[SearchHit, ...]:
        slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-") or "query"
        return tuple(
            SearchHit(title=f"Example result {i} (not a real source) about {query}",
                      url=f"https://example.org/{slug}/{i}",
                      snippet=f"Example result {i}: made-up demo text about {query!r}, not a real fact "
                              "(this toy has no real web search set up).")
            for i in range(1, 6)
        )
