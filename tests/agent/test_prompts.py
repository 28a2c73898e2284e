"""The event instructions for small models (issue 17): examples that match the registry, no order forced on calls."""

from __future__ import annotations

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
from toy_runtime.fakes import memory_ports
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


def test_an_example_read_back_is_told_from_an_answer():
    for child, reply, _ in example_lines(_definitions()):
        assert reads_back_an_example(f'You can also...\nChild: "{child}" You: {reply}')
        assert not reads_back_an_example(reply)
    assert not reads_back_an_example('She said "hi". You: there.')  # no "Child:" label
