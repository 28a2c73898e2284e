"""The design's fourth event out of the box: with the default provider (Wikipedia, no key) a question is looked up and
answered a second time from the page summary — here a loopback server that speaks Wikipedia's wire format."""

from __future__ import annotations

import json

import pytest

from toy_runtime.events import EventStatus
from toy_runtime.testing.fake_wikipedia import FakeWikipedia
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES
from .test_turns import is_follow_up, reply_for

SEARCH = ("knowledge.web.search", "web_search", {"query": "how tall are giraffes"})
LEAD = "It is the tallest living terrestrial animal"


@pytest.mark.parametrize("mode", MODES)
async def test_the_default_search_grounds_a_second_answer_in_a_wikipedia_summary(mode, make_harness):
    follow_ups = []

    def answer(request):
        if is_follow_up(request):
            follow_ups.append(request)
            return Reply(text="Giraffes are the tallest animals on land!")
        return reply_for(mode, "Let me look that up.", [SEARCH])

    async with FakeWikipedia() as wiki:
        with ScriptedLLMTransport(answer) as server:
            h = make_harness(mode=mode, llm=server, search={"wikipedia_url": wiki.base_url})
            assert h.runtime.settings.search.provider == "wikipedia"  # the default, not chosen here
            assert h.runtime.registry.lookup("knowledge.web.search").advertised
            turn = await h.turn("how tall are giraffes?")
            assert server.errors == []
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED and event.result["provider"] == "wikipedia"
    assert wiki.requests[0]["query"]["srsearch"] == "how tall are giraffes"
    assert turn.speech(answer=1) == ["Let me look that up."]
    assert " ".join(turn.speech(answer=2)) == "Giraffes are the tallest animals on land!"
    # the follow-up got the summary's short plain-text lead as evidence, never its HTML or the other sentences
    [follow] = follow_ups
    follow_text = json.dumps(follow["messages"], ensure_ascii=False)
    assert LEAD in follow_text and "https://en.wikipedia.org/wiki/Giraffe" in follow_text
    assert "<p>" not in follow_text and "nine subspecies" not in follow_text
    assert "Giraffe may refer to" not in follow_text  # the disambiguation page is not evidence


async def test_without_network_the_default_search_fails_fast_and_the_child_hears_an_honest_line(make_harness,
                                                                                                unused_tcp_port):
    # nothing listens on the port: what a toy without network meets (a refused or unresolvable connection)
    def answer(request):
        assert not is_follow_up(request), "a failed search must not get a follow-up"
        return reply_for("dual_agent", "Let me look that up.", [SEARCH])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="dual_agent", llm=server,
                         search={"wikipedia_url": f"http://127.0.0.1:{unused_tcp_port}/{{lang}}"})
        turn = await h.turn("how tall are giraffes?")
    [event] = turn.events
    assert event.status is EventStatus.FAILED and event.error_code == "search_failed"
    assert turn.speech() == ["Let me look that up.", "Sorry, I couldn't look that up just now."]
    assert turn.end.llm_calls == 1
