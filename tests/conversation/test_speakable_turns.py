"""Speakable text end to end: small-model habits through the real client, the scripted server and the kernel."""

from __future__ import annotations

import json

import pytest

from toy_runtime.agent.prompts import catalog_instruction
from toy_runtime.agent.speakable import detect
from toy_runtime.events import EventStatus
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES
from .test_turns import is_follow_up, reply_for

CALL = {"name": "adjust_device_volume", "arguments": {"mode": "absolute", "value": 30}}
CALL_JSON = json.dumps(CALL)
# how Qwen2.5 0.5B/1.5B on llama.cpp wrote the same call into its content
TEXT_CALLS = {
    "hermes": f"<tool_call>\n{CALL_JSON}\n</tool_call>",
    "bare": CALL_JSON,
    "json fence": f"```json\n{CALL_JSON}\n```",
    "tools tags": f"<tools>{CALL_JSON}</tools>",
    "doubled braces": CALL_JSON.replace("{", "{{").replace("}", "}}"),
    "list": f"[{CALL_JSON}]",
}


def spoken_is_clean(h, turn) -> None:
    text = " ".join(turn.speech())
    assert detect(text, h.runtime.chat_agent.speakable_rules) == []
    for needle in ("*", "#", "`", "{", "}", "<", "adjust_device_volume", "device.volume", "http"):
        assert needle not in text


@pytest.mark.parametrize("mode", MODES)
async def test_a_markdown_reply_is_spoken_clean(mode, scripted_llm, make_harness):
    scripted_llm.add(Reply(text="## Dinosaur facts\n**Dinosaurs** were *huge*! 🦖\n- They laid eggs.\n"
                              "- See [the museum](https://museum.example/dinos) for more.", chunk_size=3))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("tell me about dinosaurs")
    assert turn.speech(answer=1) == ["Dinosaur facts", "Dinosaurs were huge!", "They laid eggs.",
                                     "See the museum for more."]
    spoken_is_clean(h, turn)
    [stripped] = h.audit.of("chat.markup_stripped")
    assert stripped["counts"]["markdown"] >= 6 and stripped["counts"]["emoji"] == 1


@pytest.mark.parametrize("form", TEXT_CALLS)
async def test_a_tool_call_written_as_text_runs_in_chat_agent_tools(form, scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Okay, volume thirty! " + TEXT_CALLS[form], chunk_size=3))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    turn = await h.turn("set the volume to 30")
    [event] = turn.events
    assert event.name == "device.volume.adjust" and event.status is EventStatus.SUCCEEDED
    assert (await h.mixer.get()).level == 30
    assert turn.speech(answer=1) == ["Okay, volume thirty!"]
    spoken_is_clean(h, turn)
    [recovered] = h.audit.of("chat.text_tool_call_recovered")
    assert recovered["names"] == ["adjust_device_volume"]
    [detected] = h.audit.of("event.detected")
    assert detected["source"] == "tool_calls"


async def test_a_text_tool_call_with_an_unknown_name_is_rejected_not_spoken(scripted_llm, make_harness):
    scripted_llm.add(Reply(text='Sure! <tool_call>{"name": "launch_rocket", "arguments": {}}</tool_call>'))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    before = (await h.mixer.get()).level
    turn = await h.turn("launch the rocket")
    assert turn.speech(answer=1) == ["Sure!"]
    assert turn.events == [] and turn.metrics["dropped_events"] == ["launch_rocket"]
    assert h.audit.of("event.dropped")[0]["reason"] == "unknown_event"
    assert h.audit.of("chat.text_tool_call_recovered")[0]["names"] == ["launch_rocket"]
    assert (await h.mixer.get()).level == before


@pytest.mark.parametrize("form", ["hermes", "bare", "json fence"])
async def test_a_tool_call_written_as_text_is_hidden_and_audited_in_dual_agent(form, scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Okay, volume thirty! " + TEXT_CALLS[form], chunk_size=3))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    before = (await h.mixer.get()).level
    turn = await h.turn("set the volume to 30")
    assert turn.speech(answer=1) == ["Okay, volume thirty!"]
    spoken_is_clean(h, turn)
    [hidden] = h.audit.of("chat.text_tool_call_hidden")
    assert hidden["names"] == ["adjust_device_volume"] and "adjust_device_volume" in hidden["raw"]
    # the text call itself never runs; the child's own clear words are carried out by the gate instead
    assert h.audit.of("gate.used")[0]["after"] == "not_run"
    assert [(e.name, dict(e.arguments)) for e in turn.events] == [("device.volume.adjust",
                                                                   {"mode": "absolute", "value": 30})]
    assert (await h.mixer.get()).level == 30 != before


async def test_a_text_call_in_dual_agent_for_an_unclear_request_is_corrected(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Okay, I'll make it nicer! " + TEXT_CALLS["hermes"], chunk_size=3))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    before = (await h.mixer.get()).level
    turn = await h.turn("can you make it sound nicer")
    assert turn.events == [] and (await h.mixer.get()).level == before
    assert turn.speech() == ["Okay, I'll make it nicer!", "Sorry, I couldn't change the volume."]
    spoken_is_clean(h, turn)


async def test_the_catalog_read_aloud_is_not_spoken_in_dual_agent(scripted_llm, make_harness):
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    scripted_llm.add(Reply(text=catalog_instruction(h.runtime.registry) + "\nHi there, friend!", chunk_size=4))
    turn = await h.turn("hello")
    assert turn.speech(answer=1) == ["Hi there, friend!"]
    spoken_is_clean(h, turn)
    hidden = {r["hidden"] for r in h.audit.of("chat.text_hidden")}
    assert {"instruction", "catalog"} <= hidden
    # the examples' blocks were read back with the rest: none of them runs (the goodbye would end the session)
    assert turn.events == []
    ignored = h.audit.of("event.ignored")
    assert {r["name"] for r in ignored} >= {"session.terminate", "device.volume.adjust"}
    assert {r["reason"] for r in ignored} == {"an example of the prompt read back"}


async def test_a_real_block_after_the_examples_read_back_still_runs(scripted_llm, make_harness):
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    catalog = catalog_instruction(h.runtime.registry)
    scripted_llm.add(Reply(text=catalog + "\nBye bye!<agent_events>session.terminate</agent_events>", chunk_size=4))
    turn = await h.turn("bye")
    assert turn.speech(answer=1) == ["Bye bye!"] and turn.end.terminated
    assert [e.name for e in turn.events] == ["session.terminate"]
    spoken_is_clean(h, turn)


@pytest.mark.parametrize("mode", MODES)
async def test_a_reply_cut_by_the_token_limit_ends_at_its_last_whole_sentence(mode, scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Dinosaurs lived long ago. Some of them could fly and some could sw",
                         finish_reason="length", chunk_size=5))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("tell me about dinosaurs")
    assert turn.speech(answer=1) == ["Dinosaurs lived long ago."]
    [dropped] = h.audit.of("chat.partial_sentence_dropped")
    assert dropped["text"] == "Some of them could fly and some could sw"


@pytest.mark.parametrize("mode", MODES)
async def test_the_follow_up_passes_the_same_guard_and_cannot_run_a_text_call(mode, make_harness):
    def answer(request):
        if is_follow_up(request):
            return Reply(text=f"**I checked:** the tallest was Sauroposeidon! 🦕 <tool_call>{CALL_JSON}</tool_call>")
        return reply_for(mode, "Let me check.", [("knowledge.web.search", "web_search", {"query": "tallest"})])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        before = (await h.mixer.get()).level
        turn = await h.turn("what was the tallest dinosaur?")
    # the stray call is never run; the child hears that nothing changed (the not-run correction), never the markup
    assert turn.speech(answer=2) == ["I checked: the tallest was Sauroposeidon!", "Sorry, I couldn't change the volume."]
    assert [e.name for e in turn.events] == ["knowledge.web.search"]
    assert (await h.mixer.get()).level == before
    spoken_is_clean(h, turn)


async def test_a_chat_agent_reminder_line_passes_the_guard(scripted_llm, make_harness):
    from toy_runtime.host.envelope import AgentInput, EventSource, HostEvent
    from toy_runtime.host.reminders import chat_agent_line

    scripted_llm.add(Reply(text="**Time to brush your teeth!** 🪥 adjust_device_volume"))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    event = HostEvent(event_type="schedule.triggered", source=EventSource(kind="scheduler"),
                      input=AgentInput(data={"title": "brush your teeth"}))
    assert await chat_agent_line(event, h.runtime.chat_client, h.runtime.settings, h.runtime.speakable_rules) == "Time to brush your teeth!"


CAT = ("Here is a cat: <img src=x onerror=alert(1)> &lt;i&gt;Meow&lt;/i&gt; || <script>alert(2)</script> "
       "She says purr.")


@pytest.mark.parametrize("chunk_size", [1, 3])
@pytest.mark.parametrize("mode", MODES)
async def test_html_in_a_streamed_reply_never_reaches_the_speaker(mode, chunk_size, scripted_llm, make_harness):
    scripted_llm.add(Reply(text=CAT, chunk_size=chunk_size))  # every tag and reference split over deltas
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("show me a cat")
    spoken = " ".join(turn.speech())
    assert "Meow" in spoken and "She says purr" in spoken
    for needle in ("<", ">", "&", "|", "img", "onerror", "alert", "script"):
        assert needle not in spoken
    spoken_is_clean(h, turn)
    # what was removed is on the record, counted in one record per reply however many elements there were
    [stripped] = h.audit.of("chat.markup_stripped")
    assert stripped["counts"]["tag"] == 5 and stripped["counts"]["script"] == 1


async def test_a_flood_of_html_is_one_audit_record_and_no_words(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Hi!" + "<script>alert(1)</script><b>&lt;i&gt;</b>" * 50, chunk_size=7))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    turn = await h.turn("hello")
    assert turn.speech(answer=1) == ["Hi!"]
    assert h.audit.of("chat.text_hidden") == []  # never one record per element
    [stripped] = h.audit.of("chat.markup_stripped")
    assert stripped["counts"] == {"script": 50, "tag": 250}


# Issue 27: how Qwen2.5-Coder-1.5B talked about its tools on the project's dataset. Each reply below must reach the
# child as its plain sentences only; the broken or call-reading sentences are audited, never spoken.
TOOL_TALK = {
    "backticked tool name": ("Sure, I'll call `adjust_device_volume` now. Have fun!", ["Have fun!"]),
    "call parameters": ('Okay! I can use the function with the mode set to "relative" and a value of -5. '
                        "There you go.", ["Okay!", "There you go."]),
    "dangling fragment": ("Okay! Here is the JSON object for the " + CALL_JSON + " Done!", ["Okay!", "Done!"]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", TOOL_TALK)
async def test_tool_talk_is_dropped_whole_in_both_modes(mode, case, scripted_llm, make_harness):
    text, spoken = TOOL_TALK[case]
    scripted_llm.add(Reply(text=text, chunk_size=3))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("tell me a joke")
    assert turn.speech(answer=1) == spoken
    spoken_is_clean(h, turn)
    for word in ("function", "relative", "JSON", "call", "for the"):
        assert word not in " ".join(turn.speech())
    talk = [r for r in h.audit.of("chat.text_hidden") if r["hidden"] == "tool_talk"]
    assert talk and all(r["reason"].startswith("talk about a tool call") for r in talk)
