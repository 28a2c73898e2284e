"""Turn wiring that a mutation run showed no test guarded (issue 26 §2); each test names the wiring it guards."""

from __future__ import annotations

import json

import pytest

from toy_runtime.fakes.search import StaticSearch
from toy_runtime.plugins.web_search import SNIPPET_CHARS, SUMMARY_HITS
from toy_runtime.ports.search import SearchHit
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES
from .test_search_trust import SEARCH, is_event_agent
from .test_turns import is_follow_up, reply_for

TAIL = "TAIL-PAST-THE-SNIPPET-CAP"


@pytest.mark.parametrize("mode", MODES)
async def test_the_follow_up_gets_the_search_summary_not_the_raw_payload(mode, make_harness):
    """Guards compact_results → definition.summarize in the follow-up (agent/prompts.py, session/turn.py): the
    grounded second answer sees at most SUMMARY_HITS hits with capped snippets, never the raw search payload."""
    hits = [SearchHit(title=f"Dinosaur page {i}", url=f"https://dino.example/{i}",
                      snippet="Sauroposeidon was very tall. " + "x" * SNIPPET_CHARS + " " + TAIL)
            for i in range(SUMMARY_HITS + 2)]
    search = StaticSearch(answers={q: hits for q in ("tallest dinosaur", "what was the tallest dinosaur")})
    follow_ups = []

    def answer(request):
        if is_event_agent(request):
            return Reply(text="{}")
        if is_follow_up(request):
            follow_ups.append(request)
            return Reply(text="I checked: Sauroposeidon was the tallest.")
        return reply_for(mode, "Let me check.", [SEARCH])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server, search=search)
        turn = await h.turn("what was the tallest dinosaur?")
        assert server.errors == []
    assert " ".join(turn.speech(answer=2)) == "I checked: Sauroposeidon was the tallest."
    [follow] = follow_ups
    seen = json.dumps(follow["messages"], ensure_ascii=False)
    assert all(f"Dinosaur page {i}" in seen for i in range(SUMMARY_HITS))
    assert f"Dinosaur page {SUMMARY_HITS}" not in seen and TAIL not in seen


async def test_a_schedule_confirmation_is_spoken_before_the_follow_up(make_harness):
    """Guards the order of speech in session/turn.py: the deterministic continuation lines (the schedule's
    confirmation) are said first, then the grounded follow-up, which may take a second model call."""
    hit = SearchHit(title="Dinosaur records", url="https://dino.example/records", snippet="Sauroposeidon was tall.")
    search = StaticSearch(answers={"tallest dinosaur": [hit]})
    schedule = ("calendar.schedule.create", "add_schedule", {"title": "feed the cat"})

    def answer(request):
        if is_event_agent(request):
            return Reply(text="{}")
        if is_follow_up(request):
            return Reply(text="I checked: Sauroposeidon was the tallest.")
        return reply_for("chat_agent_tools", "Let me check.", [SEARCH, schedule])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="chat_agent_tools", llm=server, search=search)
        turn = await h.turn("what was the tallest dinosaur? and remind me to feed the cat in 10 minutes")
        assert server.errors == []
    kinds = [(s.kind, s.text) for s in turn.speech_items if s.answer == 2]
    confirmation = next(i for i, (kind, text) in enumerate(kinds) if kind == "continuation" and "feed the cat" in text)
    follow_up = next(i for i, (kind, _) in enumerate(kinds) if kind == "follow_up")
    assert confirmation < follow_up, kinds
