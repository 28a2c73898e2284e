"""BridgeClient/FirmwareClient against a real mosquitto: delivery, retained mirror, bad payloads, reconnects,
outage queueing, last will, MQTT 3.1.1 and TLS."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from firmware_bridge import protocol as p
from firmware_bridge.client import BridgeClient, ConnectionState
from firmware_bridge.firmware import FirmwareClient
from toy_runtime.testing.broker import MosquittoBroker, make_test_certs

from .conftest import make_config, start_broker

ROOT = Path(__file__).resolve().parents[2]


async def test_button_reaches_runtime_and_state_reaches_firmware(runtime: BridgeClient, firmware: FirmwareClient):
    assert await firmware.next_presence() is True  # the runtime announced itself (retained)
    await firmware.press("press")
    button = await asyncio.wait_for(runtime.next_button(), 5)
    assert (button.action, button.button, button.seq) == ("press", "talk", 1)
    assert await runtime.publish_state("listening", session_id="s1") is True
    state = await asyncio.wait_for(firmware.next_state(), 5)
    assert (state.state, state.session_id) == ("listening", "s1")


async def test_firmware_status_is_delivered_and_remembered(runtime: BridgeClient, firmware: FirmwareClient):
    await firmware.send_status(37, charging=True, firmware_version="2.0.1")
    status = await asyncio.wait_for(runtime.statuses().__anext__(), 5)
    assert (status.battery_pct, status.charging, status.firmware_version) == (37, True, "2.0.1")
    assert runtime.last_status == status


async def test_retained_volume_reaches_a_late_subscriber(broker: MosquittoBroker, runtime: BridgeClient, endpoints):
    await runtime.publish_volume(30, muted=True, event_id="ev-7")
    await runtime.publish_volume(35, muted=False, event_id="ev-8")
    await asyncio.sleep(0.1)  # let the broker store it; the late subscriber must get only the newest
    late = await endpoints(FirmwareClient(make_config(broker.url)))
    volume = await asyncio.wait_for(late.next_volume(), 5)
    assert (volume.level, volume.muted, volume.event_id) == (35, False, "ev-8")


async def test_bad_payloads_are_dropped_and_the_loop_keeps_working(runtime: BridgeClient, firmware: FirmwareClient):
    await firmware.send_raw(p.BUTTON, b"{not json")
    await firmware.send_raw(p.BUTTON, b'{"v":2,"action":"press"}')
    await firmware.send_raw(p.BUTTON, b'{"v":1,"action":"double_click"}')
    await firmware.send_raw(p.BUTTON, b"[]")
    await firmware.send_raw(p.FIRMWARE_STATUS, b'{"v":1,"battery_pct":300}')
    await firmware.press("release")
    button = await asyncio.wait_for(runtime.next_button(), 5)
    assert button.action == "release"  # the only good one
    assert runtime.stats.malformed == 5
    assert runtime.state is ConnectionState.CONNECTED


async def test_retained_buttons_and_commands_are_never_replayed(broker: MosquittoBroker, endpoints, wire):
    stray = wire()
    stray.publish("toy/toy1/button", p.encode(p.ButtonEvent(action="press")), retain=True)
    stray.publish("toy/toy1/command", {"v": 1, "command_id": "c1", "name": "session.end", "actor": "app"}, retain=True)
    runtime = await endpoints(BridgeClient(make_config(broker.url)))
    firmware = await endpoints(FirmwareClient(make_config(broker.url)))
    await firmware.press("release")
    assert (await asyncio.wait_for(runtime.next_button(), 5)).action == "release"
    assert runtime.stats.ignored == 2


async def test_bad_command_with_an_id_is_answered_invalid(broker: MosquittoBroker, runtime: BridgeClient, wire):
    app = wire(subscribe=["toy/toy1/command/result"])
    app.publish("toy/toy1/command", {"v": 1, "command_id": "c-bad", "name": "session.end", "actor": "stranger"})
    app.publish("toy/toy1/command", {"v": 1, "command_id": "c-ok", "name": "session.end", "actor": "fleet"})
    topic, payload, _ = await app.next()
    result = p.parse_command_result(payload)
    assert (result.command_id, result.status, result.error.code) == ("c-bad", "invalid", "invalid_payload")
    command = await asyncio.wait_for(runtime.next_command(), 5)
    assert (command.command_id, command.actor) == ("c-ok", "fleet")


async def test_each_malformed_message_is_one_warning_line_and_the_link_stays_up(
        broker: MosquittoBroker, runtime: BridgeClient, firmware: FirmwareClient, wire, caplog):
    """Pathological payloads (60k nested `[` once raised RecursionError with a traceback) are dropped with one
    WARNING line each; a deep command that names its id is still answered `invalid`. (They stay under the 64 KiB
    payload limit, so that they reach the parser.)"""
    import logging

    app = wire(subscribe=["toy/toy1/command/result"])
    deep_args: dict = {}
    for _ in range(40):
        deep_args = {"x": deep_args}
    bad = [
        (p.BUTTON, b"[" * 60_000),
        (p.BUTTON, b'{"v":1,"action":"press","seq":' + b"[" * 60_000 + b"}"),
        (p.FIRMWARE_STATUS, b"\xff\xfe not utf-8"),
        (p.BUTTON, b'{"v":1,"action":"press","x":' + b"[" * 200 + b"]" * 200 + b"}"),  # decodable, too deep
    ]
    with caplog.at_level(logging.WARNING, logger="firmware_bridge"):
        for suffix, payload in bad:
            await firmware.send_raw(suffix, payload)
        app.publish("toy/toy1/command", {"v": 1, "command_id": "c-deep", "name": "session.end", "actor": "app",
                                         "arguments": deep_args})
        result = p.parse_command_result((await app.next())[1])
        await firmware.press("release")
        assert (await asyncio.wait_for(runtime.next_button(), 5)).action == "release"
    assert (result.command_id, result.status, result.error.code) == ("c-deep", "invalid", "invalid_payload")
    assert runtime.stats.malformed == len(bad) + 1
    dropped = [r for r in caplog.records if r.name == "firmware_bridge" and "dropped" in r.getMessage()]
    assert len(dropped) == len(bad) + 1
    for record in dropped:
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert "\n" not in record.getMessage() and len(record.getMessage()) < 400
    assert runtime.state is ConnectionState.CONNECTED


async def test_overlong_command_id_is_one_warning_and_answered_with_a_shortened_id(
        broker: MosquittoBroker, runtime: BridgeClient, wire, caplog):
    """A 300-character command_id once printed a 17-line traceback (the `invalid` answer failed validation) and
    left the sender without an answer."""
    import logging

    app = wire(subscribe=["toy/toy1/command/result"])
    with caplog.at_level(logging.WARNING, logger="firmware_bridge"):
        app.publish("toy/toy1/command", {"v": 1, "command_id": "c" * 300, "name": "session.end", "actor": "app"})
        result = p.parse_command_result((await app.next())[1])
    assert (result.command_id, result.status, result.error.code) == ("c" * 128, "invalid", "invalid_payload")
    assert "command_id" in result.error.message
    lines = [r for r in caplog.records if r.name.startswith("firmware_bridge")]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING and lines[0].exc_info is None
    assert "\n" not in lines[0].getMessage()


GARBAGE = [
    b"", b"\x00\x01\x02", b"\xff\xfe\xfd not utf-8", b"null", b"1e400", b'"text"', b"[1, 2]",
    b'{"v":1,"command_id":"\\ud800","name":"device.volume.adjust","actor":"app"}',  # a lone surrogate as the id
    b'{"v":1,"command_id":"c-key","name":"x","actor":"app","arguments":{"\\udc00":1}}',
    b'{"v":"' + b"v" * 60_000 + b'","command_id":"c-version"}',  # its version once made a 100 KB log line
    b'{"v":1,"command_id":"c-nan","name":"device.volume.adjust","actor":"app","ts":NaN}',
    b'{"v":1,"command_id":"c-args","name":"x","actor":"app","arguments":[1]}',
    b'{"v":1,"command_id":1234,"name":"x","actor":"app"}',
    b'{"v":1,"command_id":"' + b"y" * 300 + b'","name":"x","actor":"app"}',
]


async def test_a_flood_of_garbage_is_rate_limited_lines_and_the_link_keeps_working(
        broker: MosquittoBroker, runtime: BridgeClient, firmware: FirmwareClient, wire, caplog):
    """A hostile client on the broker: every kind of garbage, many times, on every topic the runtime reads. No
    traceback, every line short, at most a burst of lines (plus summaries), good messages still go through."""
    import logging

    app = wire(subscribe=["toy/toy1/command/result"])
    rounds = 5
    with caplog.at_level(logging.DEBUG, logger="firmware_bridge"):
        for _ in range(rounds):
            for payload in GARBAGE:
                for suffix in (p.COMMAND, p.BUTTON, p.FIRMWARE_STATUS):
                    app.publish(f"toy/toy1/{suffix}", payload)
        # over the 64 KiB limit: the broker drops it for us (MQTT 5 maximum packet size) or the parser refuses it
        app.publish("toy/toy1/command", b'{"v":1,"command_id":"c-huge","pad":"' + b"x" * 1_000_000 + b'"}')
        app.publish("toy/toy1/command", {"v": 1, "command_id": "c-good", "name": "session.end", "actor": "app"})
        command = await asyncio.wait_for(runtime.next_command(), 10)  # per-topic order: all garbage came first
        await firmware.press("release")
        assert (await asyncio.wait_for(runtime.next_button(), 10)).action == "release"
    assert command.command_id == "c-good"
    assert runtime.stats.malformed == rounds * len(GARBAGE) * 3  # the huge one never reached the runtime
    assert runtime.state is ConnectionState.CONNECTED
    lines = [r for r in caplog.records if r.name.startswith("firmware_bridge") and r.levelno >= logging.WARNING]
    assert all(r.exc_info is None and "\n" not in r.getMessage() and len(r.getMessage()) < 400 for r in lines)
    assert len(lines) <= 10 + 1, [r.getMessage() for r in lines]  # one burst (+ at most one summary line)
    # every bad command that parsed far enough to name a usable id was answered `invalid`, and nothing else
    expected, answered = {"c-key", "c-version", "c-args", "y" * 128}, []
    while len(answered) < len(expected) * rounds:
        result = p.parse_command_result((await app.next(10))[1])
        assert result.status == "invalid"
        answered.append(result.command_id)
    assert sorted(answered) == sorted(list(expected) * rounds)


async def test_reconnects_resubscribes_and_restores_retained_after_broker_kill(broker: MosquittoBroker, endpoints):
    runtime = await endpoints(BridgeClient(make_config(broker.url)))
    firmware = await endpoints(FirmwareClient(make_config(broker.url)))
    await runtime.publish_volume(40, muted=False)
    assert (await asyncio.wait_for(firmware.next_volume(), 5)).level == 40

    started = time.perf_counter()
    await asyncio.to_thread(broker.kill)  # a crash: the broker forgets sessions and retained messages
    await asyncio.sleep(0.2)
    assert await runtime.publish_state("thinking") is False  # kept for the next connection
    await asyncio.to_thread(broker.start)
    await runtime.wait_connected(10)
    await firmware.wait_connected(10)
    recovered = time.perf_counter() - started
    print(f"\noutage (kill + 0.2 s down + restart) to recovery: {recovered * 1000:.0f} ms")
    assert runtime.stats.connects == 2 and runtime.stats.disconnects >= 1

    await firmware.press("click")  # only arrives if the runtime subscribed again on the new broker
    assert (await asyncio.wait_for(runtime.next_button(), 5)).action == "click"

    late = await endpoints(FirmwareClient(make_config(broker.url)))  # the new broker got the mirror back
    state = await asyncio.wait_for(late.next_state(), 5)
    volume = await asyncio.wait_for(late.next_volume(), 5)
    assert state.state == "thinking" and volume.level == 40
    assert await asyncio.wait_for(late.next_presence(), 5) is True


async def wait_state(endpoint, *states: ConnectionState, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while endpoint.state not in states:
        assert time.monotonic() < deadline, f"{endpoint.role} stuck in {endpoint.state}"
        await asyncio.sleep(0.01)


async def test_outage_queue_is_bounded_and_flushed_in_order(broker: MosquittoBroker, endpoints, gates, wire):
    # Gates hold each client back after the restart, so every receiver is subscribed before the sender flushes.
    runtime_gate, firmware_gate = await gates(), await gates()
    runtime = await endpoints(BridgeClient(make_config(runtime_gate.url, outbox_limit=5)))
    firmware = await endpoints(FirmwareClient(make_config(firmware_gate.url)))
    app = await asyncio.to_thread(wire, subscribe=["toy/toy1/command/result"])

    runtime_gate.shut()
    firmware_gate.shut()
    await asyncio.to_thread(broker.kill)
    await wait_state(runtime, ConnectionState.RECONNECTING)
    await wait_state(firmware, ConnectionState.RECONNECTING)
    for i in range(8):
        assert await runtime.publish_command_result(f"c{i}", "ok", {"i": i}) is False
    assert await firmware.press("press") is False
    assert runtime.stats.dropped_outbox == 3  # c0..c2, the oldest

    await asyncio.to_thread(broker.start)
    await asyncio.to_thread(app.wait_ready, 10)  # the app is back (plain paho client, resubscribed)
    runtime_gate.open = True
    await runtime.wait_connected(10)
    ids = []
    for _ in range(5):
        _, payload, _ = await app.next(timeout=10)
        ids.append(p.parse_command_result(payload).command_id)
    assert ids == ["c3", "c4", "c5", "c6", "c7"]
    assert runtime.stats.flushed == 5

    firmware_gate.open = True  # the runtime is subscribed again: the queued press must arrive
    await firmware.wait_connected(10)
    assert (await asyncio.wait_for(runtime.next_button(), 10)).action == "press"


async def test_persistent_session_keeps_buttons_sent_while_the_runtime_was_cut_off(
    broker: MosquittoBroker, endpoints, gates
):
    gate = await gates()
    runtime = await endpoints(BridgeClient(make_config(gate.url, session_expiry_s=60)))
    firmware = await endpoints(FirmwareClient(make_config(broker.url)))
    gate.shut()  # the runtime's network drops; the broker stays up
    await wait_state(runtime, ConnectionState.RECONNECTING)
    assert await firmware.press("long_press") is True  # the broker queues it in the runtime's session
    gate.open = True
    await runtime.wait_connected(10)
    assert (await asyncio.wait_for(runtime.next_button(), 5)).action == "long_press"


RUNTIME_CHILD = """
import asyncio, sys
from firmware_bridge import BridgeConfig
from firmware_bridge.client import BridgeClient
async def main():
    client = BridgeClient(BridgeConfig(url=sys.argv[1], device_id="toy1"))
    await client.start()
    await client.wait_connected(5)
    print("READY", flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""


async def test_last_will_offline_when_the_runtime_is_killed(broker: MosquittoBroker, firmware: FirmwareClient):
    child = subprocess.Popen([sys.executable, "-c", RUNTIME_CHILD, broker.url], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert (await asyncio.to_thread(child.stdout.readline)).strip() == "READY"
        assert await asyncio.wait_for(firmware.next_presence(), 5) is True
        os.kill(child.pid, signal.SIGKILL)
        assert await asyncio.wait_for(firmware.next_presence(), 5) is False  # the broker published the will
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()


async def test_clean_stop_publishes_offline(broker: MosquittoBroker, firmware: FirmwareClient):
    runtime = BridgeClient(make_config(broker.url))
    await runtime.start()
    await runtime.wait_connected(5)
    assert await asyncio.wait_for(firmware.next_presence(), 5) is True
    await runtime.stop()
    assert runtime.state is ConnectionState.STOPPED
    assert await asyncio.wait_for(firmware.next_presence(), 5) is False
    with pytest.raises(EOFError):  # inbound iterators end with the client
        await runtime.next_button()


async def test_mqtt_311_option(broker: MosquittoBroker, endpoints):
    runtime = await endpoints(BridgeClient(make_config(broker.url, protocol="3.1.1")))
    firmware = await endpoints(FirmwareClient(make_config(broker.url, protocol="3.1.1")))
    await firmware.press("long_press")
    assert (await asyncio.wait_for(runtime.next_button(), 5)).action == "long_press"
    log = broker.log_text()
    assert log.count("(p2,") == 2 and "(p5," not in log  # mosquitto logs p2 for MQTT 3.1.1, p5 for v5


async def test_tls_with_ca_file(tmp_path, endpoints):
    certs = await asyncio.to_thread(make_test_certs, tmp_path / "certs")
    with start_broker(tls=certs) as broker:
        assert broker.url.startswith("mqtts://")
        runtime = await endpoints(BridgeClient(make_config(broker.url, ca_file=str(certs.ca_file))))
        firmware = await endpoints(FirmwareClient(make_config(broker.url, ca_file=str(certs.ca_file))))
        await firmware.press("click")
        assert (await asyncio.wait_for(runtime.next_button(), 5)).action == "click"
        await runtime.stop()
        await firmware.stop()


async def test_inbox_drops_oldest_when_consumer_is_slow(runtime: BridgeClient, firmware: FirmwareClient):
    limit = runtime.config.inbox_limit
    for _ in range(limit + 4):
        await firmware.press("click")
    await firmware.press("release")  # the newest must survive
    deadline = time.monotonic() + 5
    while runtime.stats.dropped_inbox < 5 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert runtime.stats.dropped_inbox == 5
    received = [await runtime.next_button() for _ in range(limit)]
    assert received[-1].action == "release"
    assert received[0].seq == 6  # 1..5 were dropped


def test_payloads_on_the_wire_are_compact_json() -> None:
    raw = p.encode(p.StateMessage(state="idle"))
    assert json.loads(raw).keys() == {"v", "state", "ts"}  # None fields are left out


def test_a_publish_the_dropping_connection_refused_is_not_waited_for_and_raises_nothing():
    """Seen in a full run: `stop()` published `offline` just as the broker link dropped; paho's `is_published()`
    raised "not currently connected" out of the endpoint's bookkeeping and failed the stop."""
    from collections import deque
    from types import SimpleNamespace

    from firmware_bridge.endpoint import MqttEndpoint

    class Info:
        def __init__(self, published: bool | None) -> None:
            self.published = published  # None: paho refused it (rc = no connection)

        def is_published(self) -> bool:
            if self.published is None:
                raise RuntimeError("Message publish failed: The client is not currently connected.")
            return self.published

    endpoint = SimpleNamespace(_unacked=deque())
    MqttEndpoint._track(endpoint, Info(None))
    assert list(endpoint._unacked) == []
    waiting = Info(False)
    MqttEndpoint._track(endpoint, Info(True))
    MqttEndpoint._track(endpoint, waiting)
    assert list(endpoint._unacked) == [waiting]
