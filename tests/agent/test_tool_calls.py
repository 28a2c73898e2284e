"""Assembling streamed tool-call deltas: per index, repeated names, malformed JSON, early completion."""

from __future__ import annotations

from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall, ChoiceDeltaToolCallFunction

from toy_runtime.agent.tool_calls import AssembledCall, ToolCallAssembler, parse_arguments


def delta(index, id=None, name=None, arguments=None):
    function = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    entry = {"index": index, "function": function}
    if id is not None:
        entry["id"] = id
        entry["type"] = "function"
    return entry


def test_two_calls_complete_in_order_as_the_next_index_starts():
    asm = ToolCallAssembler()
    assert asm.feed([delta(0, "call_a", "device_volume_adjust", "")]) == []
    assert asm.feed([delta(0, arguments='{"mode": "rel')]) == []
    assert asm.feed([delta(0, arguments='ative", "delta": -20}')]) == []
    done = asm.feed([delta(1, "call_b", "session_terminate", "{}")])
    assert done == [
        AssembledCall(
            index=0,
            call_id="call_a",
            name="device_volume_adjust",
            arguments={"mode": "relative", "delta": -20},
            arguments_error=None,
            raw_arguments='{"mode": "relative", "delta": -20}',
        )
    ]
    assert asm.in_progress
    (last,) = asm.finish()
    assert (last.index, last.call_id, last.name, last.arguments) == (1, "call_b", "session_terminate", {})
    assert asm.finish() == []
    assert asm.completed_count == 2


def test_repeated_id_and_full_name_are_not_concatenated():
    asm = ToolCallAssembler()
    fragments = ['{"que', 'ry": "wea', 'ther"}']
    for fragment in fragments:
        assert asm.feed([delta(0, "call_x", "knowledge_web_search", fragment)]) == []
    (call,) = asm.finish()
    assert call.name == "knowledge_web_search"
    assert call.call_id == "call_x"
    assert call.arguments == {"query": "weather"}


def test_cumulative_name_is_replaced_by_the_latest():
    asm = ToolCallAssembler()
    asm.feed([delta(0, "c", "device_vol")])
    asm.feed([delta(0, name="device_volume_adjust", arguments="{}")])
    assert asm.finish()[0].name == "device_volume_adjust"


def test_malformed_arguments_never_raise():
    asm = ToolCallAssembler()
    asm.feed([delta(0, "c0", "calendar_schedule_create", '{"title": "dentist", ')])
    done = asm.feed([delta(1, "c1", "session_terminate", "not json")])
    assert done[0].arguments is None
    assert "malformed JSON" in done[0].arguments_error
    assert done[0].raw_arguments == '{"title": "dentist", '
    (second,) = asm.finish()
    assert second.arguments is None and second.arguments_error


def test_parse_arguments_edge_cases():
    assert parse_arguments("") == ({}, None)
    assert parse_arguments("  \n") == ({}, None)
    assert parse_arguments("null") == ({}, None)
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    value, error = parse_arguments("[1, 2]")
    assert value is None and "list" in error
    value, error = parse_arguments('{"a": ')
    assert value is None and error.startswith("malformed JSON")


def test_new_id_at_the_same_index_starts_a_new_call():
    # Some servers put every call at index 0 and tell them apart only by id.
    asm = ToolCallAssembler()
    asm.feed([delta(0, "c1", "device_volume_adjust", '{"mode": "mute"}')])
    done = asm.feed([delta(0, "c2", "session_terminate", "")])
    assert [c.call_id for c in done] == ["c1"]
    assert [c.call_id for c in asm.finish()] == ["c2"]


def test_several_entries_in_one_delta_and_missing_ids():
    asm = ToolCallAssembler()
    done = asm.feed([delta(0, name="a_b", arguments='{"x": 1}'), delta(1, name="c_d", arguments="")])
    assert [(c.index, c.call_id, c.arguments) for c in done] == [(0, "call_0", {"x": 1})]
    assert asm.finish()[0].call_id == "call_1"


def test_missing_index_continues_the_current_call_and_late_deltas_are_dropped():
    asm = ToolCallAssembler()
    asm.feed([{"id": "c0", "function": {"name": "a_b", "arguments": '{"x"'}}])
    asm.feed([{"function": {"arguments": ": 2}"}}])
    done = asm.feed([delta(1, "c1", "c_d", "{}")])
    assert done[0].arguments == {"x": 2}
    assert asm.feed([delta(0, arguments="late")]) == []
    assert asm.dropped_deltas == 1
    assert asm.finish()[0].arguments == {}


def test_accepts_openai_delta_objects_and_none():
    asm = ToolCallAssembler()
    assert asm.feed(None) == []
    asm.feed(
        [
            ChoiceDeltaToolCall(
                index=0,
                id="call_9",
                type="function",
                function=ChoiceDeltaToolCallFunction(name="device_volume_adjust", arguments='{"value"'),
            )
        ]
    )
    asm.feed([ChoiceDeltaToolCall(index=0, function=ChoiceDeltaToolCallFunction(arguments=": 30}"))])
    (call,) = asm.finish()
    assert (call.call_id, call.name, call.arguments) == ("call_9", "device_volume_adjust", {"value": 30})


def test_a_complete_json_object_is_not_completed_early():
    asm = ToolCallAssembler()
    assert asm.feed([delta(0, "c", "a_b", '{"x": 1}')]) == []  # parses, but more could still follow
    assert asm.in_progress
    assert asm.finish()[0].arguments == {"x": 1}
