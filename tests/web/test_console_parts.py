"""The console's parts in-process: the hub's bounded per-page queues, and next-turn overrides on a real (offline)
runtime — a turn already running keeps what it had, the next one does not know a disabled event."""

from __future__ import annotations

import asyncio

from toy_runtime.app.runtime import build_runtime
from toy_runtime.config import load_settings
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.host.envelope import message_event
from toy_runtime.session.items import EventOutcome, Speech
from toy_runtime.web.controls import ControlError, TurnOverrides
from toy_runtime.web.hub import ConsoleHub
from toy_runtime.web.tap import AuditTap, SpeechTap


async def test_a_slow_page_loses_its_oldest_messages_and_is_told_how_many():
    hub = ConsoleHub(queue_size=3)
    hub.status["state"] = "idle"
    slow = hub.subscribe()
    for n in range(5):
        hub.publish({"type": "n", "n": n})
    assert slow.take_dropped() == 3  # the status and messages 0 and 1 made room
    assert [slow.queue.get_nowait()["n"] for _ in range(3)] == [2, 3, 4]
    late = hub.subscribe()  # a page that connects now gets the status, then the recent messages
    first = late.queue.get_nowait()
    assert first == {"type": "status", "state": "idle"}


async def test_disabled_events_are_gone_from_the_next_turn_and_the_taps_see_it(tmp_path):
    hub = ConsoleHub()
    speech = SpeechTap(hub)
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path)})
    mixer = MemoryMixer(level=50)
    runtime = build_runtime(settings, mixer=mixer, audit=MemoryAudit(), audit_tap=AuditTap(hub, speech))
    overrides = TurnOverrides(runtime)
    runtime.turn_observer, runtime.before_turn = speech, overrides.apply
    runner = runtime.new_turn_runner()
    page = hub.subscribe()

    async def turn(text):
        return [item async for item in runner.run(message_event(text, source="console"))]

    items = await turn("set the volume to 30")
    assert [i.result.status.value for i in items if isinstance(i, EventOutcome)] == ["succeeded"]
    assert (await mixer.get()).level == 30

    try:
        overrides.set_enabled(["no.such.event"])
    except ControlError as exc:
        assert "unknown events: no.such.event" in str(exc)
    else:
        raise AssertionError("an unknown event was accepted")
    overrides.set_enabled(["session.terminate"])
    items = await turn("set the volume to 80")
    assert not [i for i in items if isinstance(i, EventOutcome)]  # the gate no longer knows the volume event
    assert (await mixer.get()).level == 30
    assert [s.kind for s in items if isinstance(s, Speech)] == ["offline", "offline"]

    await asyncio.sleep(0)
    messages = []
    while not page.queue.empty():
        messages.append(page.queue.get_nowait())
    session = runner.conversation.session_id
    said = [(m["turn_id"], m["kind"], m["text"]) for m in messages if m["type"] == "speech"]
    assert said == [(f"{session}.t1", "gate", "Okay, volume 30."),
                    (f"{session}.t2", "offline", "I can't think right now,"),
                    (f"{session}.t2", "offline", "but I can still change my volume or say goodbye.")]
    records = [m["record"] for m in messages if m["type"] == "audit"]
    assert [(r["kind"], r.get("text")) for r in records if r["kind"] == "turn.started"] == [
        ("turn.started", "set the volume to 30"), ("turn.started", "set the volume to 80")]
    assert [r["name"] for r in records if r["kind"] == "event.result"] == ["device.volume.adjust"]
    assert hub.status["language"] == "en"
    overrides.set_enabled(["device.volume.adjust", "session.terminate"])
    await turn("把音量调到四十")  # a Chinese turn: the page shows the language the toy now speaks
    assert hub.status["language"] == "zh"
