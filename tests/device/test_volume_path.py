"""The whole device path on real parts: a remote volume command over mosquitto → `api.invoked` host event → the ALSA
mixer (PulseAudio sees it) → VolumeSignal → retained `toy/<id>/volume` at the firmware, plus the command result.
The handler here stands in for the runtime's kernel plugin; it only uses the ports and the signal bus."""

from __future__ import annotations

import asyncio
import json
import queue

import paho.mqtt.client as mqtt

from firmware_bridge import BridgeConfig
from firmware_bridge import protocol as p
from firmware_bridge.client import BridgeClient
from firmware_bridge.firmware import FirmwareClient
from toy_runtime.adapters.alsa_mixer import AlsaMixer
from toy_runtime.adapters.mqtt_bridge import MqttBridgeAdapter
from toy_runtime.host.envelope import HostEvent
from toy_runtime.signals import SignalBus, VolumeSignal
from toy_runtime.testing.broker import MosquittoBroker
from toy_runtime.testing.pulse_mixer import PulseMixerServer


async def test_remote_volume_command_changes_alsa_and_publishes_the_signal(
    fresh_pulse: PulseMixerServer, broker: MosquittoBroker
):
    mixer = AlsaMixer(device="pulse", control="Master")
    bus = SignalBus()
    bridge: MqttBridgeAdapter | None = None

    async def volume_plugin(event: HostEvent) -> None:
        args = event.input.data["arguments"]
        current = await mixer.get()
        if args["mode"] == "relative":
            state = await mixer.set_level(current.level + int(args["delta"]))
        else:
            state = await mixer.set_level(int(args["value"]))
        bus.publish(VolumeSignal(level=state.level, muted=state.muted, event_id=event.event_id))
        assert bridge is not None
        await bridge.publish_command_result(event.input.data["command_id"], "ok", {"level": state.level})

    results: queue.Queue[bytes] = queue.Queue()
    app = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    app.on_message = lambda c, u, m: results.put(m.payload)
    app.connect(broker.host, broker.port)
    app.subscribe("toy/toy1/command/result", qos=1)
    app.loop_start()
    firmware = FirmwareClient(BridgeConfig(url=broker.url, device_id="toy1"))
    try:
        await firmware.start()
        await firmware.wait_connected(5)
        bridge = MqttBridgeAdapter(BridgeClient(BridgeConfig(url=broker.url, device_id="toy1")), bus, volume_plugin)
        async with bridge:
            await bridge.client.wait_connected(5)
            command = {"v": 1, "command_id": "vol-1", "name": "device.volume.adjust",
                       "arguments": {"mode": "relative", "delta": -20}, "actor": "app"}
            app.publish("toy/toy1/command", json.dumps(command), qos=1).wait_for_publish(5)

            volume = await asyncio.wait_for(firmware.next_volume(), 5)
            assert (volume.level, volume.muted, volume.event_id) == (30, False, "cmd_toy1_vol-1")
            assert fresh_pulse.sink_volume_pct() == 30  # the real device changed
            result = p.parse_command_result(await asyncio.to_thread(results.get, True, 5))
            assert (result.command_id, result.status, result.result) == ("vol-1", "ok", {"level": 30})

            late = FirmwareClient(BridgeConfig(url=broker.url, device_id="toy1"))  # a rebooted firmware
            await late.start()
            try:
                assert (await asyncio.wait_for(late.next_volume(), 5)).level == 30  # retained
            finally:
                await late.stop()
    finally:
        await firmware.stop()
        app.disconnect()
        app.loop_stop()
        mixer.close()
