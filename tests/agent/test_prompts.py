"""The event instructions for small models (issue 17): examples that match the registry, no order forced on calls."""

from __future__ import annotations

import pytest

from toy_runtime.agent.prompts import (
    CLOSE,
    EXAMPLES_HEADER,
    OPEN,
    catalog_instruction,
    example_lines,
    reads_back_an_example,
    tools_instruction,
)
from toy_runtime.agent.text_events import EventBlock, TextEventParser
from toy_runtime.app.runtime import build_runtime
from toy_runtime.config import load_settings
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes import memory_ports
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.fakes.search import StaticSearch
from toy_runtime.plugins import default_registry


def _definitions():
    return list(default_registry(memory_ports()))


def test_catalog_shows_examples_whose_blocks_parse_to_registered_names():
    definitions = _definitions()
    text = catalog_instruction(definitions)
    names = {d.name for d in definitions}
    shown = text.split(EXAMPLES_HEADER)[1]  # (the instruction's own `<agent_events>name, name</…>` is a template)
    blocks = [item for item in TextEventParser().feed(shown) if isinstance(item, EventBlock)]
    assert blocks, "the examples show the block"
    assert {n for block in blocks for n in block.names} <= names
    assert any(not block for _, _, block in example_lines(definitions)), "an example without any event"
    assert catalog_instruction(definitions, examples=False) in text and OPEN not in text.split(CLOSE)[-1]


def test_an_example_naming_an_unregistered_event_is_left_out():
    volume_only = [d for d in _definitions() if d.name == "device.volume.adjust"]
    shown = example_lines(volume_only)
    assert shown and all("session.terminate" not in block and "calendar" not in block for _, _, block in shown)
    assert "session.terminate" not in catalog_instruction(volume_only)


def test_tools_instruction_does_not_put_speech_before_calls():
    # "First say your short natural reply, then call the needed tools" suppressed calls on a 0.5B model
    text = tools_instruction().lower()
    assert "first say" not in text and "call the matching tools" in text and "goodbye" in text


def test_tools_reply_first_asks_for_the_reply_before_the_calls():
    # the design's first-answer order, an option measured on the 1.5B model (docs/benchmarks.md)
    text = tools_instruction(reply_first=True).lower()
    assert text.index("first say your short natural reply") < text.index("call the matching tools")
    assert text != tools_instruction().lower()


def test_an_example_read_back_is_told_from_an_answer():
    for child, reply, _ in example_lines(_definitions()):
        assert reads_back_an_example(f'You can also...\nChild: "{child}" You: {reply}')
        assert not reads_back_an_example(reply)
    assert not reads_back_an_example('She said "hi". You: there.')  # no "Child:" label


@pytest.mark.parametrize("reply_first", [False, True])
async def test_the_reply_first_setting_reaches_the_direct_mode_request(tmp_path, reply_first):
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path), "TOY_AGENT__TOOL_INVOCATION_MODE": "chat_agent_tools",
                                  "TOY_AGENT__TOOLS_REPLY_FIRST": str(reply_first).lower(),
                                  "TOY_LLM__BASE_URL": "http://127.0.0.1:9/v1"})  # never contacted
    runtime = build_runtime(settings, mixer=MemoryMixer(), search=StaticSearch(), calendar=MemoryCalendarStore(),
                            audit=MemoryAudit())
    try:
        sent = [m["content"] for m in runtime.chat_agent.system_messages(events=True)]
        assert tools_instruction(reply_first=reply_first) in sent
        assert tools_instruction(reply_first=not reply_first) not in sent
    finally:
        await runtime.aclose()
