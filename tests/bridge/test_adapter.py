"""MqttBridgeAdapter: buttons and commands become host events, signals are mirrored (retained), results go back."""

from __future__ import annotations

import asyncio
import statistics
import time

from firmware_bridge import protocol as p
from firmware_bridge.client import BridgeClient, ConnectionState
from firmware_bridge.firmware import FirmwareClient
from toy_runtime.adapters.mqtt_bridge import MqttBridgeAdapter
from toy_runtime.host.envelope import HostEvent
from toy_runtime.signals import SessionState, SignalBus, StateSignal, VolumeSignal
from toy_runtime.testing.broker import MosquittoBroker

from .conftest import make_config


class Recorder:
    """An on_host_event handler that keeps what it got and can react."""

    def __init__(self, react=None) -> None:
        self.events: asyncio.Queue[HostEvent] = asyncio.Queue()
        self.react = react

    async def __call__(self, event: HostEvent) -> None:
        self.events.put_nowait(event)
        if self.react is not None:
            await self.react(event)

    async def next(self, timeout: float = 5.0) -> HostEvent:
        return await asyncio.wait_for(self.events.get(), timeout)


async def test_button_becomes_host_event_and_state_is_echoed(
    broker: MosquittoBroker, firmware: FirmwareClient
):
    bus = SignalBus()

    async def open_session(event: HostEvent) -> None:  # what the runtime would do: talk press → listening
        action = event.input.data["action"]
        state = SessionState.LISTENING if action == "press" else SessionState.THINKING
        bus.publish(StateSignal(state, session_id="s1"))

    recorder = Recorder(open_session)
    async with MqttBridgeAdapter(BridgeClient(make_config(broker.url)), bus, recorder) as bridge:
        await bridge.client.wait_connected(5)
        await firmware.press("press")
        event = await recorder.next()
        assert event.event_type == "button.pressed"
        assert (event.source.kind, event.source.name) == ("firmware", "toy1")
        assert event.input.data == {"action": "press", "button": "talk", "seq": 1}
        assert event.input.text is None  # a button is not disguised as user text
        state = await asyncio.wait_for(firmware.next_state(), 5)
        assert (state.state, state.session_id) == ("listening", "s1")

        # Round trip firmware → runtime → host event → signal → MQTT → firmware (figures only: bench_mqtt.py).
        samples = []
        for i in range(30):
            started = time.perf_counter()
            await firmware.press("release" if i % 2 == 0 else "press")
            expected = "thinking" if i % 2 == 0 else "listening"
            while (await asyncio.wait_for(firmware.next_state(), 5)).state != expected:
                pass
            samples.append((time.perf_counter() - started) * 1000)
        print(f"\nbutton → state echo over loopback: p50 {statistics.median(samples):.2f} ms, "
              f"max {max(samples):.2f} ms (n={len(samples)})")
    assert bridge.client.state is ConnectionState.STOPPED  # the adapter started it, so it stopped it


async def test_signals_are_mirrored_retained_including_the_last_known(broker: MosquittoBroker, endpoints):
    bus = SignalBus()
    bus.publish(VolumeSignal(level=25, muted=False, event_id="boot"))  # before the adapter exists
    client = await endpoints(BridgeClient(make_config(broker.url)))
    async with MqttBridgeAdapter(client, bus, Recorder()):
        late = await endpoints(FirmwareClient(make_config(broker.url)))
        assert (await asyncio.wait_for(late.next_volume(), 5)).event_id == "boot"
        bus.publish(VolumeSignal(level=60, muted=True, event_id="ev-42"))
        bus.publish(StateSignal(SessionState.SPEAKING, session_id="s9"))
        volume = await asyncio.wait_for(late.next_volume(), 5)
        assert (volume.level, volume.muted, volume.event_id) == (60, True, "ev-42")
        assert (await asyncio.wait_for(late.next_state(), 5)).state == "speaking"
        later = await endpoints(FirmwareClient(make_config(broker.url)))  # retained for whoever comes next
        assert (await asyncio.wait_for(later.next_volume(), 5)).event_id == "ev-42"
    assert client.state is ConnectionState.CONNECTED  # not started by the adapter: left running


async def test_command_becomes_api_invoked_and_result_goes_back(broker: MosquittoBroker, endpoints, wire):
    app = wire(subscribe=["toy/toy1/command/result"])
    client = await endpoints(BridgeClient(make_config(broker.url)))
    recorder = Recorder()
    async with MqttBridgeAdapter(client, SignalBus(), recorder) as bridge:
        app.publish("toy/toy1/command", {"v": 1, "command_id": "c-1", "name": "device.volume.adjust",
                                         "arguments": {"mode": "absolute", "value": 30}, "actor": "app",
                                         "actor_id": "parent-phone"})
        event = await recorder.next()
        assert event.event_type == "api.invoked"
        assert event.source.kind == "remote_api"
        assert (event.actor.kind, event.actor.id) == ("app", "parent-phone")
        assert event.input.data == {"name": "device.volume.adjust", "arguments": {"mode": "absolute", "value": 30},
                                    "command_id": "c-1"}
        assert event.delivery.surface == "mqtt"
        assert event.event_id == "cmd_toy1_c-1"  # stable: a redelivered command is the same event

        # The runtime decided (say the binding lacks the capability) and answers through the adapter.
        await bridge.publish_command_result("c-1", "refused", error_code="capability_not_granted",
                                            error_message="device.volume.adjust not granted to remote_api")
        _, payload, _ = await app.next()
        result = p.parse_command_result(payload)
        assert (result.command_id, result.status, result.error.code) == ("c-1", "refused", "capability_not_granted")


async def test_handler_failure_answers_failed_and_keeps_running(broker: MosquittoBroker, endpoints, wire):
    app = wire(subscribe=["toy/toy1/command/result"])
    client = await endpoints(BridgeClient(make_config(broker.url)))
    firmware = await endpoints(FirmwareClient(make_config(broker.url)))

    async def explode(event: HostEvent) -> None:
        if event.input.data.get("command_id") == "boom" or event.input.data.get("action") == "click":
            raise RuntimeError("handler bug")

    recorder = Recorder(explode)
    async with MqttBridgeAdapter(client, SignalBus(), recorder):
        app.publish("toy/toy1/command", {"v": 1, "command_id": "boom", "name": "x", "actor": "fleet"})
        _, payload, _ = await app.next()
        result = p.parse_command_result(payload)
        assert (result.status, result.error.code) == ("failed", "internal_error")
        await firmware.press("click")  # the handler raises for this one too
        await firmware.press("release")
        actions = [(await recorder.next()).input.data.get("action") for _ in range(3)]
        assert actions == [None, "click", "release"]  # the command, then both buttons: the pumps survived
