"""Commands that are safe to lose: one that is too old never runs (answered `refused`/`expired`, audited), whether
it said so itself (`expires_at`) or through MQTT 5 message expiry; the broker drops a command whose message expiry
ran out while the toy was cut off. Real mosquitto, the real runtime and kernel.

(Safe to replay: a redelivered command id runs once, across restarts too: test_idempotent_restart.py.)"""

from __future__ import annotations

import asyncio
import time

from firmware_bridge.client import BridgeClient, ConnectionState
from toy_runtime.app.firmware_link import start_device_link
from toy_runtime.app.runtime import build_runtime
from toy_runtime.config import load_settings, with_updates
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.device import MemoryMixer

from .conftest import make_config
from .test_client import wait_state
from .test_runtime_link import collect_results


def volume_to(command_id: str, value: int, **extra) -> dict:
    return {"v": 1, "command_id": command_id, "name": "device.volume.adjust",
            "arguments": {"mode": "absolute", "value": value}, "actor": "app", **extra}


async def test_an_expired_command_is_refused_audited_and_never_runs(broker, tmp_path, wire):
    settings = with_updates(load_settings(env={"TOY_STATE_DIR": str(tmp_path)}),
                            mqtt={"url": broker.url, "device_id": "toyE",
                                  "remote_capabilities": ["device.volume.adjust"]})
    audit, mixer = MemoryAudit(), MemoryMixer(level=50)
    runtime = build_runtime(settings, audit=audit, mixer=mixer)
    link = await start_device_link(runtime)
    app = wire(subscribe=["toy/toyE/command/result"])
    try:
        app.publish("toy/toyE/command", volume_to("stale", 90, expires_at=time.time() - 5))
        app.publish("toy/toyE/command", volume_to("by-mqtt", 30), expiry_s=60)  # within its message expiry
        results = await collect_results(app, 2)
        app.publish("toy/toyE/command", volume_to("stale", 90, expires_at=time.time() - 5))  # a redelivery
        again = await collect_results(app, 1)
    finally:
        await link.aclose()
        await runtime.aclose()
    assert results["stale"]["status"] == "refused" and results["stale"]["error"]["code"] == "expired"
    assert again["stale"]["error"]["code"] == "expired"
    assert results["by-mqtt"]["status"] == "ok" and mixer.level == 30  # 90 never applied
    refused = [r for r in audit.of("remote.refused") if r.get("reason") == "expired"]
    assert [r["command_id"] for r in refused] == ["stale", "stale"]
    assert [r["command_id"] for r in audit.of("remote.executed")] == ["by-mqtt"]


async def test_the_broker_drops_a_command_that_expired_while_the_toy_was_cut_off(broker, endpoints, gates, wire):
    gate = await gates()
    toy = await endpoints(BridgeClient(make_config(gate.url, "toyQ", session_expiry_s=60)))
    app = wire()
    gate.shut()  # the toy's network drops; the broker keeps its session and queues QoS 1 messages for it
    await wait_state(toy, ConnectionState.RECONNECTING)
    app.publish("toy/toyQ/command", volume_to("short-lived", 10), expiry_s=1)
    app.publish("toy/toyQ/command", volume_to("long-lived", 20), expiry_s=600)
    await asyncio.sleep(2.2)  # the first one's message expiry runs out in the queue
    gate.open = True
    await toy.wait_connected(10)
    command = await asyncio.wait_for(toy.next_command(), 5)
    assert command.command_id == "long-lived"  # the short-lived one was dropped by the broker
    # the rest of its message expiry became its deadline: ~600 s minus the time it waited in the queue
    assert command.expires_at is not None and 590 < command.expires_at - time.time() <= 600
    assert toy.stats.malformed == 0
