"""Back after a broker restart or a network drop, on a real mosquitto: subscribed again (or the session resumed, when
the broker kept it), the retained state right, and republished once per connection."""

from __future__ import annotations

import asyncio
import re

from firmware_bridge import protocol as p
from firmware_bridge.client import BridgeClient, ConnectionState
from toy_runtime.testing.broker import MosquittoBroker

from .conftest import make_config, start_broker
from .test_client import wait_state


def count(broker: MosquittoBroker, pattern: str) -> int:
    return len(re.findall(pattern, broker.log_text()))


async def test_after_a_broker_restart_the_toy_is_subscribed_again_with_its_retained_state(endpoints, wire):
    broker = start_broker(extra_config="log_type debug")  # without persistence: it forgets sessions and retained
    try:
        toy = await endpoints(BridgeClient(make_config(broker.url, "toyR")))
        await toy.publish_state("speaking", session_id="s1")
        await toy.publish_volume(35, muted=False)
        # the volume is the last retained value the toy republishes: once the broker has it, it has them all
        watcher = wire(target=broker, subscribe=["toy/toyR/volume"])
        assert (await watcher.next())[0] == "toy/toyR/volume"
        await asyncio.to_thread(broker.restart, down_s=0.3)
        topic, payload, _ = await watcher.next(10)  # the broker forgot everything: this came from the toy again
        assert topic == "toy/toyR/volume" and p.parse_volume(payload).level == 35
        await toy.wait_connected(10)
        late = wire(target=broker, subscribe=["toy/toyR/#"])
        retained = {}
        while len(retained) < 3:
            topic, payload, was_retained = await late.next()
            assert was_retained
            retained[topic] = payload
        assert p.parse_state(retained["toy/toyR/state"]).state == "speaking"
        assert p.parse_volume(retained["toy/toyR/volume"]).level == 35
        assert retained["toy/toyR/online"] == b"online"
        late.publish("toy/toyR/command", p.encode(p.Command(command_id="after", name="session.end", actor="app")))
        assert (await asyncio.wait_for(toy.next_command(), 5)).command_id == "after"  # subscribed again
        assert toy.stats.connects == 2 and toy.stats.resumed == 0
        # the retained values went out once per connection (before the restart: the publish itself + the first ready)
        assert count(broker, r"Received PUBLISH from runtime-toyR-\w+ \(d0, q1, r1, m\d+, 'toy/toyR/state'") == 2
        assert count(broker, r"Received SUBSCRIBE from runtime-toyR") == 2
    finally:
        broker.close()


async def test_a_resumed_session_keeps_its_subscriptions_without_subscribing_again(endpoints, gates, wire):
    broker = start_broker(extra_config="log_type debug")
    try:
        gate = await gates(broker)
        toy = await endpoints(BridgeClient(make_config(gate.url, "toyS", session_expiry_s=60)))
        app = wire(target=broker)
        gate.shut()  # a network drop: the broker keeps the session
        await wait_state(toy, ConnectionState.RECONNECTING)
        gate.open = True
        await wait_state(toy, ConnectionState.CONNECTED, timeout=10)
        app.publish("toy/toyS/command", p.encode(p.Command(command_id="resumed", name="session.end", actor="app")))
        assert (await asyncio.wait_for(toy.next_command(), 5)).command_id == "resumed"
        assert toy.stats.connects == 2 and toy.stats.resumed == 1
        assert count(broker, r"Received SUBSCRIBE from runtime-toyS") == 1  # the session's own, never renewed
    finally:
        broker.close()
