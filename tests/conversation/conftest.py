"""A runtime wired to in-memory device/calendar/search fakes and a scripted LLM: in-process (`scripted_llm`, an httpx
MockTransport) for the conversation's logic, or the loopback server (`llm_server`) where the wire is the point."""

from __future__ import annotations

import pytest

from toy_runtime.app.runtime import build_runtime
from toy_runtime.config import load_settings, with_updates
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.fakes.search import StaticSearch
from toy_runtime.host.envelope import message_event
from toy_runtime.session.items import EventOutcome, Speech, TurnEnd

MODES = ["dual_agent", "chat_agent_tools"]


class Harness:
    """Builds a runtime for one mode and runs text turns, collecting items."""

    def __init__(self, tmp_path, *, mode="dual_agent", base_url=None, mixer=None, search=None, calendar=None,
                 events=(), clock=None, llm=None, **llm_settings):
        # llm: a scripted LLM, in-process or on loopback (its url, and its transport if it has one)
        if llm is not None:
            base_url = llm.url
        settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path)})
        # the gate's first-token budget too: its own tests turn it down (test_gate_budget.py)
        llm_updates = {"base_url": base_url, "model": "scripted-model", "read_timeout_s": 2.0,
                       "connect_timeout_s": 1.0, "gate_first_token_s": 600.0, **llm_settings}
        # the cue's own tests turn it on: a turn slowed by a loaded machine must not gain one elsewhere
        settings = with_updates(settings, agent={"tool_invocation_mode": mode, "holding_cue_after_s": 600.0},
                                llm=llm_updates,
                                # "off": no provider configured (the default would be the real Wikipedia)
                                search={"provider": "none"} if search == "off" else
                                (search if isinstance(search, dict) else {}))
        self.audit = MemoryAudit()
        self.mixer = mixer or MemoryMixer()
        # "off": no provider configured; a dict: these [search] settings, the runtime builds the provider itself
        self.search = None if search == "off" or isinstance(search, dict) else (search or StaticSearch())
        self.calendar = calendar or MemoryCalendarStore()
        # events: a test's own definitions next to the built-in ones; clock: e.g. a ManualClock for expiry
        self.runtime = build_runtime(settings, mixer=self.mixer, search=self.search, calendar=self.calendar,
                                     audit=self.audit, events=events, clock=clock,
                                     llm_transport=getattr(llm, "transport", None))
        self.runner = self.runtime.new_turn_runner()

    async def turn(self, text):
        items = []
        async for item in self.runner.run(message_event(text)):
            items.append(item)
        return Turn(items)

    async def close(self):
        await self.runtime.aclose()


class Turn:
    """The items of one turn with convenient views."""

    def __init__(self, items):
        self.items = items
        self.end: TurnEnd = items[-1]
        assert isinstance(self.end, TurnEnd)

    def speech(self, answer=None):
        return [i.text for i in self.items if isinstance(i, Speech) and (answer is None or i.answer == answer)]

    @property
    def speech_items(self):
        return [i for i in self.items if isinstance(i, Speech)]

    @property
    def events(self):
        return [i.result for i in self.items if isinstance(i, EventOutcome)]

    @property
    def metrics(self):
        return self.end.metrics


@pytest.fixture
async def make_harness(tmp_path):
    made = []

    def factory(**kw):
        harness = Harness(tmp_path, **kw)
        made.append(harness)
        return harness

    yield factory
    for harness in made:
        await harness.close()
