"""`firmware-sim` in script mode against a real broker and the runtime-side adapter."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from firmware_bridge.client import BridgeClient
from toy_runtime.adapters.mqtt_bridge import MqttBridgeAdapter
from toy_runtime.host.envelope import HostEvent
from toy_runtime.signals import SessionState, SignalBus, StateSignal, VolumeSignal
from toy_runtime.testing.broker import MosquittoBroker

from .conftest import make_config, start_broker

ROOT = Path(__file__).resolve().parents[2]


async def run_sim(*args: str, password: str | None = None, keys: bytes | None = None) -> tuple[int, str]:
    env = dict(os.environ)
    env.pop("FIRMWARE_SIM_PASSWORD", None)
    if password is not None:
        env["FIRMWARE_SIM_PASSWORD"] = password
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "firmware_bridge.simulator", *args, cwd=ROOT, env=env,
        stdin=asyncio.subprocess.PIPE if keys is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(keys), 30)
    return proc.returncode, out.decode()


async def test_script_mode_drives_the_session(broker: MosquittoBroker):
    bus = SignalBus()
    bus.publish(VolumeSignal(level=45, muted=False))
    events: list[HostEvent] = []

    async def runtime(event: HostEvent) -> None:
        events.append(event)
        action = event.input.data["action"]
        bus.publish(StateSignal(SessionState.LISTENING if action == "press" else SessionState.THINKING, "s1"))

    async with MqttBridgeAdapter(BridgeClient(make_config(broker.url)), bus, runtime) as bridge:
        await bridge.client.wait_connected(5)
        code, out = await run_sim("--mqtt-url", broker.url, "--device-id", "toy1", "--script",
                                  "expect-volume:45,press,expect:listening,release,expect:thinking,status:30:1")
        assert code == 0, out
        assert "runtime online" in out
        assert [e.input.data["action"] for e in events] == ["press", "release"]
        assert all(e.event_type == "button.pressed" and e.source.kind == "firmware" for e in events)
        for _ in range(100):  # the status was the last step: it arrives just after the sim exits
            if bridge.client.last_status is not None:
                break
            await asyncio.sleep(0.02)
        assert bridge.client.last_status is not None
        assert (bridge.client.last_status.battery_pct, bridge.client.last_status.charging) == (30, True)


async def test_script_expect_timeout_exits_3(broker: MosquittoBroker):
    code, out = await run_sim("--mqtt-url", broker.url, "--script", "expect:speaking", "--expect-timeout", "0.3")
    assert code == 3
    assert "timed out" in out


async def test_bad_password_from_env_exits_2_with_a_clear_message():
    with start_broker(users={"toy1": "right"}) as broker:
        code, out = await run_sim("--mqtt-url", broker.url, "--username", "toy1", "--script", "press",
                                  password="wrong")
        assert code == 2
        assert "auth_failed" in out
        code, out = await run_sim("--mqtt-url", broker.url, "--username", "toy1", "--script", "press",
                                  password="right")
        assert code == 0, out


async def test_refused_exits_2_saying_refused_not_timeout():
    from toy_runtime.testing.broker import free_port

    code, out = await run_sim("--mqtt-url", f"mqtt://127.0.0.1:{free_port()}", "--script", "press",
                              "--connect-timeout", "60")  # the first refusal ends it, not the 60 s
    assert code == 2
    assert "error refused" in out and "timeout" not in out and "Traceback" not in out


async def test_keyboard_mode_sends_keys(broker: MosquittoBroker):
    events: list[HostEvent] = []

    async def runtime(event: HostEvent) -> None:
        events.append(event)

    async with MqttBridgeAdapter(BridgeClient(make_config(broker.url)), SignalBus(), runtime) as bridge:
        await bridge.client.wait_connected(5)
        code, out = await run_sim("--mqtt-url", broker.url, keys=b"tplrxq")  # x: unknown key, ignored
        assert code == 0, out
        for _ in range(100):
            if len(events) == 4:
                break
            await asyncio.sleep(0.02)
        assert [e.input.data["action"] for e in events] == ["click", "press", "long_press", "release"]
