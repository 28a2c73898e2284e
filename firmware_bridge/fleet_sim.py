"""`fleet-sim`: N virtual toys speaking the real protocol, and a commander that measures command → result.

One process, one thread: thousands of paho clients cannot each have a network thread, so every client runs on
paho's external-loop API (`loop_read`/`loop_write`/`loop_misc`, socket callbacks) under one `selectors` loop.

A virtual toy is the protocol part of a toy without audio: it logs in with its own account (user name = device id),
publishes `online` and its retained `state` once subscribed to its `command` topic, and answers each command with a
`command/result` (deduplicated by `command_id`: a QoS 1 redelivery is answered again but counted once). It reconnects
with the bridge's own full-jitter backoff (backoff.py). The commander (the `fleet` account) sends commands at a rate
to random toys and matches results by `command_id`: latency p50/p99, lost, duplicated. Real toys (`real_toys`: device
ids of real runtimes on the same broker, not simulated here) are commanded beside them at their own rate and counted
apart, so a run shows what a real runtime answers inside a loaded fleet.

    python -m firmware_bridge.fleet_sim --url mqtt://127.0.0.1:1883 --toys 100 --rate 10 --duration 30
    toy-runtime bench fleet ...    # the same with its own mosquitto, broker restarts and broker CPU/RSS

Passwords: every toy's password is `<password prefix><device id>` (the sim's own broker is provisioned that way).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import selectors
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from . import protocol as p
from .backoff import Backoff

STATES = ("idle", "listening", "thinking", "speaking")


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file limit towards `wanted` (up to the hard limit); returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, wanted)) if hard != resource.RLIM_INFINITY else max(soft, wanted)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def percentile(values: list[float], pct: float) -> float | None:
    """The `pct` percentile (nearest rank) of `values`, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(pct / 100 * len(ordered)) - 1))]


@dataclass
class Endpoint:
    """One paho client on the shared loop, with its own reconnect schedule."""

    name: str
    client: Any
    backoff: Backoff
    connected: bool = False
    subscribed: bool = False
    next_attempt: float = 0.0  # monotonic time of the next connection attempt while disconnected
    connecting: bool = False
    tried: bool = False  # connect() once, reconnect() after


@dataclass
class VirtualToy(Endpoint):
    """A toy's protocol side: presence, retained state, commands answered once per id."""

    state: str = "idle"
    state_mid: int | None = None  # the retained state published on this connection, until the broker acks it
    state_acked: bool = False  # the broker holds this connection's retained state
    answered: set[str] = field(default_factory=set)
    redelivered: int = 0  # commands seen again (QoS 1 duplicates): answered again, executed once


@dataclass
class FleetStats:
    """What a run measured."""

    sent: int = 0
    results: int = 0
    duplicated: int = 0  # a second result for a command id
    redelivered: int = 0  # commands a toy received twice (it answered, but ran once)
    latencies_ms: list[float] = field(default_factory=list)
    connects: list[float] = field(default_factory=list)  # monotonic times of good CONNACKs of toys
    connect_attempts: int = 0
    refused: int = 0

    def summary(self, pending: int) -> dict[str, Any]:
        return {"sent": self.sent, "results": self.results, "lost": pending, "duplicated": self.duplicated,
                "redelivered_to_toys": self.redelivered,
                "p50_ms": _round(percentile(self.latencies_ms, 50)), "p99_ms": _round(percentile(self.latencies_ms, 99)),
                "max_ms": _round(max(self.latencies_ms) if self.latencies_ms else None)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


class FleetSim:
    """N virtual toys and a commander on one selector loop. Drive it with `step()` / `run_for()` / `run_until()`."""

    def __init__(self, host: str, port: int, toys: int, *, password_prefix: str = "pw-", prefix: str = "sim",
                 commander_user: str = "fleet", commander_password: str | None = None, keepalive_s: int = 60,
                 backoff_base_s: float = 0.5, backoff_cap_s: float = 30.0, protocol: str = "5",
                 seed: int | None = None, real_toys: tuple[str, ...] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        import paho.mqtt.client as mqtt

        self._mqtt = mqtt
        self.host, self.port = host, port
        self.keepalive_s = keepalive_s
        self.clock = clock
        self.random = random.Random(seed)
        self.selector = selectors.DefaultSelector()
        self.stats = FleetStats()
        self.real_stats = FleetStats()  # commands to real runtimes (`real_toys`), counted apart
        self.pending: dict[str, float] = {}  # command id → monotonic send time
        self.real_pending: dict[str, float] = {}
        self.done: dict[str, FleetStats] = {}  # answered command id → the stats it was counted in
        self.real_toys = tuple(real_toys)
        self.real_online: dict[str, bool] = {name: False for name in self.real_toys}
        self.real_online_at: dict[str, float] = {}  # monotonic time the commander last saw each real toy `online`
        self.protocol = mqtt.MQTTv5 if protocol == "5" else mqtt.MQTTv311
        self.toys = [self._make(VirtualToy, f"{prefix}-{i:05d}", f"{password_prefix}{prefix}-{i:05d}",
                                backoff_base_s, backoff_cap_s) for i in range(toys)]
        self.by_id = {toy.name: toy for toy in self.toys}
        self.commander = self._make(Endpoint, commander_user, commander_password or f"{password_prefix}{commander_user}",
                                    backoff_base_s, backoff_cap_s, client_id=f"commander-{uuid.uuid4().hex[:6]}")
        self._last_misc = 0.0

    # --- clients ----------------------------------------------------------------------------------------------------

    def _make(self, kind: type, name: str, password: str, base_s: float, cap_s: float,
              client_id: str | None = None) -> Any:
        mqtt = self._mqtt
        client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id=client_id or name,
                             protocol=self.protocol)
        client.username_pw_set(name, password)
        endpoint = kind(name=name, client=client, backoff=Backoff(base_s, cap_s, uniform=self.random.uniform))
        client.user_data_set(endpoint)
        client.on_socket_open = self._on_socket_open
        client.on_socket_close = self._on_socket_close
        client.on_socket_register_write = self._on_register_write
        client.on_socket_unregister_write = self._on_unregister_write
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        client.on_publish = self._on_publish
        if isinstance(endpoint, VirtualToy):
            client.will_set(f"toy/{name}/online", p.OFFLINE, qos=1, retain=True)
        return endpoint

    def endpoints(self) -> list[Endpoint]:
        return [self.commander, *self.toys]

    def _on_socket_open(self, client: Any, endpoint: Endpoint, sock: Any) -> None:
        self.selector.register(sock, selectors.EVENT_READ, endpoint)

    def _on_socket_close(self, client: Any, endpoint: Endpoint, sock: Any) -> None:
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def _on_register_write(self, client: Any, endpoint: Endpoint, sock: Any) -> None:
        try:
            self.selector.modify(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, endpoint)
        except (KeyError, ValueError):
            pass

    def _on_unregister_write(self, client: Any, endpoint: Endpoint, sock: Any) -> None:
        try:
            self.selector.modify(sock, selectors.EVENT_READ, endpoint)
        except (KeyError, ValueError):
            pass

    def _on_connect(self, client: Any, endpoint: Endpoint, flags: Any, reason: Any, properties: Any) -> None:
        endpoint.connecting = False
        if reason.is_failure:
            self.stats.refused += 1
            self._schedule(endpoint)
            return
        endpoint.connected = True
        endpoint.backoff.reset()
        if isinstance(endpoint, VirtualToy):
            self.stats.connects.append(self.clock())
            client.subscribe(f"toy/{endpoint.name}/command", qos=1)
        else:
            client.subscribe([("toy/+/command/result", 1), *((f"toy/{name}/online", 1) for name in self.real_toys)])

    def _on_subscribe(self, client: Any, endpoint: Endpoint, mid: int, reasons: list[Any], properties: Any) -> None:
        endpoint.subscribed = not any(getattr(r, "is_failure", False) for r in reasons)
        if isinstance(endpoint, VirtualToy):  # once per connection: presence and the retained state
            client.publish(f"toy/{endpoint.name}/online", p.ONLINE, qos=1, retain=True)
            self._publish_state(endpoint)

    def _on_disconnect(self, client: Any, endpoint: Endpoint, flags: Any, reason: Any, properties: Any) -> None:
        endpoint.connected = endpoint.subscribed = endpoint.connecting = False
        if isinstance(endpoint, VirtualToy):
            endpoint.state_acked = False
        self._schedule(endpoint)

    def _schedule(self, endpoint: Endpoint) -> None:
        endpoint.next_attempt = self.clock() + endpoint.backoff.next_delay()

    def _publish_state(self, toy: VirtualToy) -> None:
        info = toy.client.publish(f"toy/{toy.name}/state", p.encode(p.StateMessage(state=toy.state)), qos=1,
                                  retain=True)
        toy.state_mid, toy.state_acked = info.mid, False

    def _on_publish(self, client: Any, endpoint: Endpoint, mid: int, reason: Any, properties: Any) -> None:
        if isinstance(endpoint, VirtualToy) and mid == endpoint.state_mid:
            endpoint.state_acked = True

    def _on_message(self, client: Any, endpoint: Endpoint, message: Any) -> None:
        if isinstance(endpoint, VirtualToy):
            self._toy_command(endpoint, message.payload)
        elif message.topic.endswith("/online"):
            name = message.topic.split("/")[1]
            self.real_online[name] = message.payload == p.ONLINE.encode()
            if self.real_online[name]:
                self.real_online_at[name] = self.clock()
        else:
            self._result(message.payload)

    def _toy_command(self, toy: VirtualToy, payload: bytes) -> None:
        try:
            command = p.parse_command(payload)
        except p.ProtocolError:
            return
        if command.command_id in toy.answered:
            toy.redelivered += 1
            self.stats.redelivered += 1
        else:
            toy.answered.add(command.command_id)
            if command.name == "state.set":  # the sim's one command that changes what the toy shows
                toy.state = str(command.arguments.get("state", "idle"))
                self._publish_state(toy)
        result = p.CommandResult(command_id=command.command_id, status="ok", result={"state": toy.state})
        toy.client.publish(f"toy/{toy.name}/command/result", p.encode(result), qos=1)

    def _result(self, payload: bytes) -> None:
        try:
            result = p.parse_command_result(payload)
        except p.ProtocolError:
            return
        for pending, stats in ((self.pending, self.stats), (self.real_pending, self.real_stats)):
            sent = pending.pop(result.command_id, None)
            if sent is not None:
                stats.results += 1
                stats.latencies_ms.append((self.clock() - sent) * 1000)
                self.done[result.command_id] = stats
                return
        if result.command_id in self.done:
            self.done[result.command_id].duplicated += 1

    # --- the loop ---------------------------------------------------------------------------------------------------

    def _attempt(self, endpoint: Endpoint) -> None:
        """One non-threaded connection attempt (blocking TCP connect: fast on loopback, refused at once when down)."""
        endpoint.connecting = True
        self.stats.connect_attempts += endpoint is not self.commander
        try:
            if not endpoint.tried:
                endpoint.tried = True
                endpoint.client.connect(self.host, self.port, keepalive=self.keepalive_s)
            else:
                endpoint.client.reconnect()
        except OSError:
            endpoint.connecting = False
            self._schedule(endpoint)

    def step(self, timeout: float = 0.05, max_attempts: int = 200) -> None:
        """One round: due (re)connection attempts (at most `max_attempts`, so the loop keeps serving), socket I/O,
        and once a second paho's keepalive bookkeeping."""
        now = self.clock()
        attempts = 0
        for endpoint in self.endpoints():
            if attempts >= max_attempts:
                break
            if not endpoint.connected and not endpoint.connecting and endpoint.next_attempt <= now:
                self._attempt(endpoint)
                attempts += 1
        for key, mask in self.selector.select(timeout):
            endpoint = key.data
            if mask & selectors.EVENT_READ:
                endpoint.client.loop_read()
            if mask & selectors.EVENT_WRITE and endpoint.client.want_write():
                endpoint.client.loop_write()
        if now - self._last_misc >= 1.0:
            self._last_misc = now
            for endpoint in self.endpoints():
                if endpoint.connected or endpoint.connecting:
                    endpoint.client.loop_misc()

    def run_for(self, seconds: float, on_step: Callable[[], None] | None = None) -> None:
        deadline = self.clock() + seconds
        while self.clock() < deadline:
            self.step(min(0.05, max(0.0, deadline - self.clock())))
            if on_step:
                on_step()

    def run_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Step until `done()` or the timeout; returns whether it happened."""
        deadline = self.clock() + timeout_s
        while self.clock() < deadline:
            if done():
                return True
            self.step(0.02)
        return done()

    def all_subscribed(self) -> bool:
        """Every toy subscribed, with its retained state acknowledged by the broker (and the commander ready)."""
        return self.commander.subscribed and all(toy.subscribed and toy.state_acked for toy in self.toys)

    def connect_all(self, timeout_s: float = 120.0) -> float:
        """Connect everyone; returns the seconds it took (TimeoutError if not all subscribed in time)."""
        started = self.clock()
        if not self.run_until(self.all_subscribed, timeout_s):
            missing = sum(not toy.subscribed for toy in self.toys)
            raise TimeoutError(f"{missing} of {len(self.toys)} toys not subscribed after {timeout_s:g} s")
        return self.clock() - started

    # --- the commander ----------------------------------------------------------------------------------------------

    def send_command(self, toy: VirtualToy | str | None = None, *, name: str = "device.volume.adjust",
                     arguments: dict[str, Any] | None = None, expiry_s: int | None = None) -> str:
        """Publish one command to `toy` (a random virtual toy when None; a `real_toys` name for a real runtime);
        returns its id."""
        toy = toy or self.random.choice(self.toys)
        real = isinstance(toy, str)
        target = toy if isinstance(toy, str) else toy.name
        command_id = uuid.uuid4().hex[:16]
        command = p.Command(command_id=command_id, name=name, actor="fleet", ts=round(time.time(), 3),
                            arguments=arguments if arguments is not None else {"mode": "relative", "delta": 1})
        properties = None
        if expiry_s is not None and self.protocol == self._mqtt.MQTTv5:
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            properties = Properties(PacketTypes.PUBLISH)
            properties.MessageExpiryInterval = expiry_s
        (self.real_pending if real else self.pending)[command_id] = self.clock()
        (self.real_stats if real else self.stats).sent += 1
        self.commander.client.publish(f"toy/{target}/command", p.encode(command), qos=1, properties=properties)
        return command_id

    def command_at_rate(self, rate_per_s: float, seconds: float, drain_s: float = 10.0,
                        real_rate_per_s: float = 1.0) -> dict[str, Any]:
        """Send `rate_per_s` commands a second to random virtual toys for `seconds` (and `real_rate_per_s` to each
        real toy), then wait up to `drain_s` for the last results; what never came back counts as lost. The real
        toys' figures are under "real"."""
        started = self.clock()
        interval = 1.0 / rate_per_s
        next_send = started
        real_interval = 1.0 / real_rate_per_s if self.real_toys and real_rate_per_s > 0 else None
        next_real = started

        def send_due() -> None:
            nonlocal next_send, next_real
            now = self.clock()
            while next_send <= now and now - started < seconds:
                self.send_command()
                next_send += interval
            while real_interval is not None and next_real <= now and now - started < seconds:
                for name in self.real_toys:
                    self.send_command(name)
                next_real += real_interval

        self.run_for(seconds, on_step=send_due)
        self.run_until(lambda: not self.pending and not self.real_pending, drain_s)
        self.run_for(0.5)  # late duplicates
        summary = self.stats.summary(len(self.pending))
        if self.real_toys:
            summary["real"] = {"toys": len(self.real_toys), "rate_per_s_each": real_rate_per_s,
                               **self.real_stats.summary(len(self.real_pending))}
        return summary

    def wait_real_online(self, timeout_s: float = 60.0) -> bool:
        """Step until every real toy has said `online` (its runtime is subscribed to its commands)."""
        return self.run_until(lambda: all(self.real_online.values()), timeout_s)

    def set_states(self, timeout_s: float = 60.0) -> dict[str, str]:
        """Give every toy a random state through a `state.set` command; returns the expected state per toy."""
        expected = {}
        for toy in self.toys:
            state = self.random.choice(STATES)
            expected[toy.name] = state
            self.send_command(toy, name="state.set", arguments={"state": state})
            self.step(0)
        self.run_until(lambda: not self.pending, timeout_s)
        return expected

    def read_retained_states(self, username: str, password: str, timeout_s: float = 60.0) -> dict[str, str]:
        """The retained `state` of each toy as a fresh subscriber sees it (a dashboard, a rebooted firmware). It runs
        on this loop: a process with thousands of sockets has descriptors past select()'s 1024, which paho's own
        `loop()` cannot wait on."""
        mqtt = self._mqtt
        seen: dict[str, str] = {}
        client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2,
                             client_id=f"checker-{uuid.uuid4().hex[:6]}", protocol=self.protocol)
        client.username_pw_set(username, password)
        checker = Endpoint(name="checker", client=client, backoff=Backoff(1.0, 1.0))
        client.user_data_set(checker)
        client.on_socket_open = self._on_socket_open
        client.on_socket_close = self._on_socket_close
        client.on_socket_register_write = self._on_register_write
        client.on_socket_unregister_write = self._on_unregister_write

        def on_message(c: Any, u: Any, message: Any) -> None:
            if message.retain:
                try:
                    seen[message.topic.split("/")[1]] = p.parse_state(message.payload).state
                except p.ProtocolError:
                    seen[message.topic.split("/")[1]] = "<bad>"

        client.on_connect = lambda c, u, f, r, pr: setattr(checker, "connected", True)
        client.on_message = on_message
        client.connect(self.host, self.port, keepalive=60)
        try:
            self.run_until(lambda: checker.connected, 10.0)
            # In chunks: on one wildcard subscription mosquitto sends at most max_inflight + max_queued_messages
            # retained messages and silently drops the rest (fleet.conf: 20 + 200), so `toy/+/state` would miss most.
            names = [toy.name for toy in self.toys]
            for start in range(0, len(names), 100):
                chunk = names[start:start + 100]
                client.subscribe([(f"toy/{name}/state", 1) for name in chunk])
                self.run_until(lambda: all(name in seen for name in chunk), timeout_s / max(1, len(names) / 100))
        finally:
            client.disconnect()
            client.loop_write()
            sock = client.socket()
            if sock is not None:
                self._on_socket_close(client, checker, sock)
        return seen

    def close(self) -> None:
        for endpoint in self.endpoints():
            try:
                endpoint.client.disconnect()
                endpoint.client.loop_write()
            except (OSError, ValueError):  # best effort at teardown: the socket may already be gone
                pass
            sock = endpoint.client.socket()
            if sock is not None:
                self._on_socket_close(endpoint.client, endpoint, sock)
                sock.close()
        self.selector.close()


def connections_per_second_peak(times: list[float], since: float) -> int:
    """The most good connections in any one-second bucket after `since`."""
    buckets: dict[int, int] = {}
    for t in times:
        if t >= since:
            buckets[int(t - since)] = buckets.get(int(t - since), 0) + 1
    return max(buckets.values(), default=0)


def main(argv: list[str] | None = None) -> int:
    """Run against an existing broker: connect N toys, command them at a rate, print one JSON summary."""
    from .config import parse_mqtt_url

    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.fleet_sim", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="mqtt://127.0.0.1:1883")
    parser.add_argument("--toys", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0, help="commands per second")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of commands")
    parser.add_argument("--password-prefix", default="pw-", help="each account's password is this + its name")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        url = parse_mqtt_url(args.url)
    except ValueError as exc:
        print(f"fleet_sim: --url: {exc}", file=sys.stderr)
        return 2
    raise_fd_limit(args.toys + 256)
    sim = FleetSim(url.host, url.port, args.toys, password_prefix=args.password_prefix, seed=args.seed)
    try:
        connect_s = sim.connect_all()
        summary = {"toys": args.toys, "connect_all_s": round(connect_s, 2),
                   **sim.command_at_rate(args.rate, args.duration)}
    except TimeoutError as exc:
        print(f"fleet_sim: {exc}", file=sys.stderr)
        return 1
    finally:
        sim.close()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
