#!/usr/bin/env python3
"""Benchmark the firmware bridge over loopback with a private mosquitto:

1. button → state round trip: firmware publishes a button, the runtime's MqttBridgeAdapter turns it into a host event,
   the handler publishes a StateSignal, the adapter mirrors it to MQTT and the firmware receives it (p50/p90/p99).
2. reconnect after a broker restart (SIGTERM and SIGKILL): time from the broker listening again until the runtime is
   connected + subscribed, from the outage start until then, and until a button pressed right after arrives.

Usage: python scripts/bench_mqtt.py [--round-trips 200] [--restarts 5] [--min-delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from firmware_bridge import BridgeConfig  # noqa: E402
from firmware_bridge.client import BridgeClient  # noqa: E402
from firmware_bridge.firmware import FirmwareClient  # noqa: E402
from toy_runtime.adapters.mqtt_bridge import MqttBridgeAdapter  # noqa: E402
from toy_runtime.host.envelope import HostEvent  # noqa: E402
from toy_runtime.signals import SessionState, SignalBus, StateSignal  # noqa: E402
from toy_runtime.testing.broker import MosquittoBroker  # noqa: E402


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(name: str, samples: list[float]) -> str:
    return (f"{name}: n={len(samples)} p50={pct(samples, 0.5):.2f} ms p90={pct(samples, 0.9):.2f} ms "
            f"p99={pct(samples, 0.99):.2f} ms max={max(samples):.2f} ms mean={statistics.fmean(samples):.2f} ms")


async def round_trips(broker: MosquittoBroker, n: int, protocol: str) -> list[float]:
    bus = SignalBus()

    async def runtime(event: HostEvent) -> None:
        action = event.input.data["action"]
        bus.publish(StateSignal(SessionState.LISTENING if action == "press" else SessionState.IDLE, "bench"))

    config = dict(url=broker.url, device_id="bench1", protocol=protocol)
    firmware = FirmwareClient(BridgeConfig(**config))
    samples: list[float] = []
    async with MqttBridgeAdapter(BridgeClient(BridgeConfig(**config)), bus, runtime) as bridge:
        await bridge.client.wait_connected(5)
        await firmware.start()
        try:
            await firmware.wait_connected(5)
            for i in range(n + 10):  # 10 warm-up trips
                action, expected = ("press", "listening") if i % 2 == 0 else ("release", "idle")
                started = time.perf_counter()
                await firmware.press(action)  # type: ignore[arg-type]
                while (await asyncio.wait_for(firmware.next_state(), 5)).state != expected:
                    pass
                if i >= 10:
                    samples.append((time.perf_counter() - started) * 1000)
        finally:
            await firmware.stop()
    return samples


async def reconnects(broker: MosquittoBroker, trials: int, min_delay: float, kill: bool) -> dict[str, list[float]]:
    config = dict(url=broker.url, device_id="bench2", reconnect_min_delay_s=min_delay)
    runtime = BridgeClient(BridgeConfig(**config))
    firmware = FirmwareClient(BridgeConfig(**{**config, "reconnect_min_delay_s": 0.05}))
    out: dict[str, list[float]] = {"listening→ready": [], "outage→ready": [], "outage→button": []}
    await runtime.start()
    await firmware.start()
    try:
        await runtime.wait_connected(5)
        await firmware.wait_connected(5)
        for _ in range(trials):
            down = time.perf_counter()
            await asyncio.to_thread(broker.kill if kill else broker.stop)
            await asyncio.sleep(0.1)
            while runtime.state == "connected" or firmware.state == "connected":  # both ends noticed the outage
                await asyncio.sleep(0.01)
            await asyncio.to_thread(broker.start)
            up = time.perf_counter()
            await runtime.wait_connected(30)
            ready = time.perf_counter()
            await firmware.wait_connected(30)
            await firmware.press("click")
            await asyncio.wait_for(runtime.next_button(), 30)
            delivered = time.perf_counter()
            out["listening→ready"].append((ready - up) * 1000)
            out["outage→ready"].append((ready - down) * 1000)
            out["outage→button"].append((delivered - down) * 1000)
            await asyncio.sleep(0.2)
    finally:
        await firmware.stop()
        await runtime.stop()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--round-trips", type=int, default=200)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--min-delay", type=float, default=0.5, help="runtime reconnect_min_delay_s (config default)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the reconnect warnings are expected here
    with MosquittoBroker() as broker:
        print(f"mosquitto on {broker.url} (set_tcp_nodelay true; clients set TCP_NODELAY)")
        for protocol in ("5", "3.1.1"):
            samples = await round_trips(broker, args.round_trips, protocol)
            print(summary(f"button → host event → state signal → firmware (MQTT {protocol})", samples))
        for kill in (False, True):
            how = "SIGKILL" if kill else "SIGTERM"
            results = await reconnects(broker, args.restarts, args.min_delay, kill)
            print(f"broker restart ({how}, 0.1 s down, reconnect_min_delay_s={args.min_delay}):")
            for name, samples in results.items():
                print(f"  {name}: median {statistics.median(samples):.0f} ms, "
                      f"min {min(samples):.0f} ms, max {max(samples):.0f} ms (n={len(samples)})")


if __name__ == "__main__":
    asyncio.run(main())
