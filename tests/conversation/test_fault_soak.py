"""A fault soak: 300 turns per mode against the real scripted server, 30 % of them broken, with per-turn checks.

Each turn: bye / set the volume / a question (English or Chinese); a seeded RNG picks a provider fault for about
30 % of the turns (every stream fault, a stale keep-alive connection, and model habits: an unknown event name, an
unclosed block, the catalog's example block copied literally), and small-model habits that are not faults on
another 30 % (markdown, a tool call written as text in either form, the event catalog read aloud). Checked on every
turn: something is said; nothing unspeakable is said (the guard's own detector finds no markup, JSON, tool-call
syntax, event or tool name, catalog or instruction text); goodbye ends the session; the volume becomes what was
asked, changed exactly once; nothing but registered events runs; a requested action that did not run is followed
by a correction or the fault line.
"""

from __future__ import annotations

import json
import random

import pytest

from toy_runtime.agent.prompts import catalog_instruction
from toy_runtime.agent.speakable import detect
from toy_runtime.events import EventStatus
from toy_runtime.events.continuation import NOT_RUN_LINES
from toy_runtime.language import guess_locale
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer

from .conftest import MODES

pytestmark = pytest.mark.slow  # 600 turns: the full suite runs it, the fast lane does not

TURNS = 300
FAULT_RATE = 0.3
STREAM_FAULTS = ["http_500", "http_429", "http_400", "drop_before_done", "disconnect", "empty_stream", "hang",
                 "stall", "garbage", "malformed_chunk", "close_keepalive"]
HABITS = ["unknown_event", "unclosed_block", "example_block"]  # the model's events cannot run
STYLE = ["markdown", "hermes_call", "bare_call", "catalog_echo"]  # unspeakable text around a good answer
NEVER_SPOKEN = ("*", "#", "`", "{", "}", "<", ">", "agent_events", "tool_call", "device.volume", "volume_adjust",
                "adjust_device_volume", "terminate_session", "session.terminate", "knowledge.web")


def ends_with(said: str, line: str) -> bool:
    """Whether the spoken clauses end with the line; clauses are joined by spaces, Chinese has none."""
    return "".join(said.split()).endswith("".join(line.split()))


def styled(text: str, style: str | None, calls: list[tuple[str, str]], catalog: str) -> str:
    """The answer as a small model writes it: markdown, calls as text (Hermes or bare JSON), the catalog echoed."""
    if style == "markdown":
        return f"## Answer\n**{text}** 🙂\n- okay"
    if style == "catalog_echo":
        return catalog + "\n" + text
    if style in ("hermes_call", "bare_call") and calls:
        body = "\n".join(json.dumps({"name": n, "arguments": json.loads(a)}) for n, a in calls)
        return text + (f"\n<tool_call>\n{body}\n</tool_call>" if style == "hermes_call" else "\n" + body)
    return text


def plan_turn(rng: random.Random, mode: str, level: int, catalog: str):
    """(utterance, kind, reply, injected) for one turn; kind is bye | volume | question."""
    kind = rng.choice(["bye", "volume", "volume", "question", "question"])
    zh = rng.random() < 0.3
    if kind == "bye":
        utterance, text, events = ("再见" if zh else "bye"), ("拜拜！" if zh else "Bye bye!"), [("session.terminate",
                                                                                          "terminate_session", {})]
    elif kind == "volume":
        target = rng.choice([v for v in range(10, 100, 10) if v != level])
        utterance = f"把音量调到{target}" if zh else f"set the volume to {target}"
        text, events = ("好的！" if zh else f"Okay, volume {target}!"), [
            ("device.volume.adjust", "adjust_device_volume", {"mode": "absolute", "value": target})]
    else:
        utterance = "鲸鱼是什么" if zh else "what is a whale"
        text, events = ("鲸鱼是很大的动物。" if zh else "A whale is a very big animal."), []
    injected = style = None
    if rng.random() < FAULT_RATE:
        injected = rng.choice(STREAM_FAULTS + (HABITS if mode == "dual_agent" else HABITS[:1]))
    elif rng.random() < FAULT_RATE:
        style = rng.choice(STYLE)
    names = [e[0] for e in events]
    if injected == "unknown_event" or (injected in ("unclosed_block", "example_block") and not names):
        names, events = ["device.volume.boost"], [("device.volume.boost", "boost_volume", {})]
    if injected == "example_block":  # the instruction's example copied as it stands
        names = ["event.name", "other.name"]
    calls = [(tool, json.dumps(args)) for _, tool, args in events]
    if mode == "dual_agent":
        block = ("<agent_events>" + ", ".join(names) + ("" if injected == "unclosed_block" else "</agent_events>")
                 if names else "")
        reply = Reply(text=styled(text, style, calls, catalog) + block, chunk_size=5)
    elif style in ("hermes_call", "bare_call") and calls:  # the calls arrive as content text, not native calls
        reply = Reply(text=styled(text, style, calls, catalog), chunk_size=5)
    else:
        reply = Reply(text=styled(text, style, calls, catalog), tool_calls=calls, chunk_size=5)
    if injected in STREAM_FAULTS:
        reply = Reply(**{**reply.__dict__, "fault": injected})
    return utterance, kind, reply, injected or style, (target if kind == "volume" else None)


@pytest.mark.parametrize("mode", MODES)
async def test_fault_soak(mode, make_harness):
    rng = random.Random(f"soak-{mode}")
    current: dict = {}
    counts = {"turns": 0, "faults": 0, "styled": 0, "gate": 0, "corrections": 0}
    with ScriptedLLMServer(lambda request: current["reply"]) as server:
        # "hang" and "stall" last until the client gives up: ~25 of the 300 turns wait out a timeout, so it is
        # short; a loopback reply that a loaded machine delays past it is a fault the checks below accept
        h = make_harness(mode=mode, base_url=server.url, read_timeout_s=0.5, first_token_timeout_s=0.5)
        agent = h.runtime.settings.agent
        registry_names = {d.name for d in h.runtime.registry}
        rules = h.runtime.chat_agent.speakable_rules
        catalog = catalog_instruction(h.runtime.registry)
        for n in range(TURNS):
            level = (await h.mixer.get()).level
            utterance, kind, reply, injected, target = plan_turn(rng, mode, level, catalog)
            current["reply"] = reply
            changes_before = len(h.mixer.changes)
            turn = await h.turn(utterance)
            where = f"turn {n} {mode} {utterance!r} injected={injected}: {turn.speech()}"
            spoken = [s for s in turn.speech_items if s.kind != "holding"]
            changes = h.mixer.changes[changes_before:]
            assert spoken, where
            said = " ".join(s.text for s in spoken)
            assert detect(said, rules) == [], where
            assert not [needle for needle in NEVER_SPOKEN if needle in said], where
            assert {e.name for e in turn.events} <= registry_names, where
            if kind == "bye":
                assert turn.end.terminated, where
                assert [e.name for e in turn.events if e.status is EventStatus.SUCCEEDED] == ["session.terminate"]
                h.runner = h.runtime.new_turn_runner()  # the next conversation
            else:
                assert not turn.end.terminated, where
            if kind == "volume":  # the model's event, or the gate when the call or its event failed
                assert changes == [("set_level", target)], where
            else:
                assert changes == [], where
            # a load spike can time out a call that was meant to succeed: then the fault line is the right answer
            faulted = turn.metrics["fault"] is not None
            fault_line = agent.fault_line_for(guess_locale(utterance))  # the child's language
            if kind == "question" and injected in HABITS and not faulted:  # a promise that never ran: corrected
                said_after = " ".join(s.text for s in spoken if s.answer == 2)
                assert said_after in NOT_RUN_LINES.values(), where
            elif kind == "question" and injected in HABITS:
                assert ends_with(said, fault_line), where
            elif kind == "question" and injected in STREAM_FAULTS and injected != "close_keepalive":
                assert ends_with(said, fault_line), where
            counts["turns"] += 1
            counts["faults"] += turn.metrics["fault"] is not None
            counts["styled"] += injected in STYLE
            counts["gate"] += turn.metrics["path"] == "gate"
            counts["corrections"] += any(s.kind == "correction" for s in spoken)
        assert server.errors == []
    assert counts["faults"] >= TURNS * FAULT_RATE * 0.5 and counts["corrections"] > 0
    assert counts["styled"] >= TURNS * FAULT_RATE * 0.5
    print(f"soak {mode}: {counts}")
