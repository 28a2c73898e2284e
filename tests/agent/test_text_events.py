"""The dual_agent text-event parser: hidden blocks, split markers, stray markup, unclosed blocks."""

from __future__ import annotations

import random
import re

import pytest

from toy_runtime.agent.text_events import (
    CLOSE_MARKER,
    OPEN_MARKER,
    EventBlock,
    TextEventParser,
    UnclosedBlock,
    Visible,
    parse_names,
)

STREAM = (
    "Sure, 3 < 5 and <b>bold</b> too!\n"
    "<agent_events>\n  device.volume.adjust, calendar_schedule_create;\n knowledge.web.search </agent_events>"
    "  Back to text < here.<agent_events>session.terminate</agent_events>Bye <"
)
EXPECTED_VISIBLE = "Sure, 3 < 5 and <b>bold</b> too!\n  Back to text < here.Bye <"
EXPECTED_NAMES = [
    ("device.volume.adjust", "calendar_schedule_create", "knowledge.web.search"),
    ("session.terminate",),
]


def run(chunks: list[str]) -> list:
    parser = TextEventParser()
    items: list = []
    for chunk in chunks:
        items.extend(parser.feed(chunk))
    items.extend(parser.close())
    return items


def visible(items: list) -> str:
    return "".join(item.text for item in items if isinstance(item, Visible))


def blocks(items: list) -> list[tuple[str, ...]]:
    return [item.names for item in items if isinstance(item, EventBlock)]


def reference(text: str) -> tuple[str, list[tuple[str, ...]], str | None]:
    """Whole-string semantics the incremental parser must match: (visible, block names, unclosed raw)."""
    pattern = re.compile(f"{re.escape(OPEN_MARKER)}|{re.escape(CLOSE_MARKER)}", re.I | re.A)
    shown, names, pos = [], [], 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            shown.append(text[pos:])
            return "".join(shown), names, None
        shown.append(text[pos : match.start()])
        pos = match.end()
        if match.group(0)[1] == "/":
            continue  # stray close marker: hidden
        end = re.compile(re.escape(CLOSE_MARKER), re.I | re.A).search(text, pos)
        if end is None:
            return "".join(shown), names, text[pos:]
        names.append(parse_names(text[pos : end.start()]))
        pos = end.end()


def test_whole_stream_in_one_chunk():
    items = run([STREAM])
    assert visible(items) == EXPECTED_VISIBLE
    assert blocks(items) == EXPECTED_NAMES


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_split_at_every_index(cut):
    items = run([STREAM[:cut], STREAM[cut:]])
    assert visible(items) == EXPECTED_VISIBLE
    assert blocks(items) == EXPECTED_NAMES
    assert not any(isinstance(item, UnclosedBlock) for item in items)


def test_split_into_three_at_every_pair_of_indexes():
    text = "Hi <x> there.<agent_events>a.b, c_d</agent_events> ok"
    for i in range(1, len(text)):
        for j in range(i + 1, len(text)):
            items = run([text[:i], text[i:j], text[j:]])
            assert visible(items) == "Hi <x> there. ok", (i, j)
            assert blocks(items) == [("a.b", "c_d")], (i, j)


def test_character_by_character_never_leaks_block_content():
    parser = TextEventParser()
    shown = ""
    for ch in STREAM:
        for item in parser.feed(ch):
            if isinstance(item, Visible):
                shown += item.text
        assert "agent_events" not in shown
        assert "device.volume" not in shown and "session.terminate" not in shown
    for item in parser.close():
        shown += item.text
    assert shown == EXPECTED_VISIBLE


def test_random_chunking_matches_whole_string_semantics():
    rng = random.Random(1234)
    pieces = ["Hello ", "<", "<a", "</", OPEN_MARKER, CLOSE_MARKER, "<AGENT_EVENTS>", "x.y", ", ", "\n", "z_w;", "3 < 5"]
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        want_visible, want_blocks, want_unclosed = reference(text)
        cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(0, 6)))) if len(text) > 1 else []
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        items = run(chunks)
        assert visible(items) == want_visible, (text, chunks)
        assert blocks(items) == want_blocks, (text, chunks)
        unclosed = [item.raw for item in items if isinstance(item, UnclosedBlock)]
        assert unclosed == ([want_unclosed] if want_unclosed is not None else []), (text, chunks)


def test_block_is_reported_the_moment_it_closes():
    parser = TextEventParser()
    assert parser.feed("Okay!<agent_events>device.volume.adjust</agent_events") == [Visible("Okay!")]
    assert parser.in_block
    items = parser.feed(">")
    assert items == [EventBlock(("device.volume.adjust",), "device.volume.adjust")]
    assert not parser.in_block
    assert parser.feed(" Later text") == [Visible(" Later text")]


def test_stray_less_than_is_released_as_soon_as_it_cannot_be_a_marker():
    parser = TextEventParser()
    assert parser.feed("3 <") == [Visible("3 ")]
    assert parser.held == "<"
    assert parser.feed(" 5") == [Visible("< 5")]
    assert parser.held == ""
    assert parser.feed("<b") == [Visible("<b")]  # "<b" cannot start either marker
    assert parser.feed("<agent") == []
    assert parser.held == "<agent"
    assert parser.feed("ur") == [Visible("<agentur")]


def test_held_text_never_exceeds_a_marker_prefix():
    parser = TextEventParser()
    for ch in "a <agent_event <agent_events <x </agent_event <</ < <<<" * 3:
        parser.feed(ch)
        held = parser.held.lower()
        assert len(held) < len(CLOSE_MARKER)
        assert held == "" or OPEN_MARKER.startswith(held) or CLOSE_MARKER.startswith(held)


def test_unclosed_block_is_never_visible_and_reported_on_close():
    parser = TextEventParser()
    items = parser.feed("Goodbye!<agent_events>session.terminate, dev")
    items += parser.feed("ice.volume.adjust and more words")
    assert visible(items) == "Goodbye!"
    closing = parser.close()
    assert closing == [UnclosedBlock("session.terminate, device.volume.adjust and more words")]
    assert closing[0].names == ("session.terminate", "device.volume.adjust", "and", "more", "words")


def test_close_releases_a_held_partial_marker():
    parser = TextEventParser()
    assert parser.feed("See you </agent_ev") == [Visible("See you ")]
    assert parser.close() == [Visible("</agent_ev")]


def test_stray_close_marker_is_hidden():
    assert visible(run(["Done.</agent_events> Really."])) == "Done. Really."


def test_markers_are_case_insensitive():
    items = run(["Ok <AGENT_EVENTS>session.terminate</Agent_Events>"])
    assert visible(items) == "Ok "
    assert blocks(items) == [("session.terminate",)]


def test_empty_block_and_parser_reuse():
    parser = TextEventParser()
    assert parser.feed("<agent_events> </agent_events>") == [EventBlock((), " ")]
    parser.feed("<agent_events>x")
    parser.close()
    assert parser.feed("fresh") == [Visible("fresh")]


@pytest.mark.parametrize(
    "body, names",
    [
        ("device.volume.adjust", ("device.volume.adjust",)),
        ("  a.b ,c.d;e_f\n g-h\tI.j  ", ("a.b", "c.d", "e_f", "g-h", "I.j")),
        ('["device.volume.adjust", "session.terminate"]', ("device.volume.adjust", "session.terminate")),
        ("- device_volume_adjust\n- session_terminate()\n", ("device_volume_adjust", "session_terminate")),
        ("`a.b` | 'c.d'.", ("a.b", "c.d")),
        ("\n\n", ()),
        ("a.b, a.b", ("a.b", "a.b")),
    ],
)
def test_parse_names(body, names):
    assert parse_names(body) == names
