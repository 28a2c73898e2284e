"""Fixtures for the bridge tests: a private mosquitto per test, endpoints that are always stopped, and a plain paho
client that plays the companion app (or any third party) on the wire."""

from __future__ import annotations

import asyncio
import json
import queue
import socket
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import pytest

from firmware_bridge import BridgeConfig
from firmware_bridge.client import BridgeClient
from firmware_bridge.endpoint import MqttEndpoint
from firmware_bridge.firmware import FirmwareClient
from toy_runtime.testing.broker import MosquittoBroker, start_broker_for_test

FAST = {"reconnect_min_delay_s": 0.05, "reconnect_max_delay_s": 0.5}


start_broker = start_broker_for_test  # a private mosquitto; skipped here, failed in CI, when it cannot run


def make_config(url: str, device_id: str = "toy1", **overrides: Any) -> BridgeConfig:
    """A config with quick reconnects (tests restart brokers)."""
    return BridgeConfig(url=url, device_id=device_id, **{**FAST, **overrides})


@pytest.fixture
async def endpoints() -> AsyncIterator[Callable[..., Any]]:
    """`await start(endpoint, wait=True)` starts an endpoint that is stopped at teardown."""
    started: list[MqttEndpoint] = []

    async def start(endpoint: MqttEndpoint, wait: bool = True) -> Any:
        started.append(endpoint)
        await endpoint.start()
        if wait:
            await endpoint.wait_connected(5)
        return endpoint

    try:
        yield start
    finally:
        for endpoint in reversed(started):
            await endpoint.stop()


@pytest.fixture
async def runtime(broker: MosquittoBroker, endpoints: Any) -> BridgeClient:
    return await endpoints(BridgeClient(make_config(broker.url)))


@pytest.fixture
async def firmware(broker: MosquittoBroker, endpoints: Any) -> FirmwareClient:
    return await endpoints(FirmwareClient(make_config(broker.url)))


class WireClient:
    """A bare paho client (the companion app, a dashboard...): subscribe, publish, collect messages."""

    def __init__(self, url_host: str, port: int, *, subscribe: tuple[str, ...] | list[str] = (),
                 username: str | None = None, password: str | None = None, client_id: str | None = None,
                 session_expiry_s: int = 0) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        self.messages: queue.Queue[tuple[str, bytes, bool]] = queue.Queue()
        self.subscribed = list(subscribe)  # re-subscribed on every connect
        self._connected = queue.Queue[bool]()
        self.client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2,
                                  client_id=client_id or f"wire-{uuid.uuid4().hex[:8]}", protocol=mqtt.MQTTv5)
        if username:
            self.client.username_pw_set(username, password)
        self.client.reconnect_delay_set(0.05, 0.5)  # type: ignore[arg-type]
        self.client.on_socket_open = lambda c, u, s: s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda c, u, mid, rc, p: self._connected.put(True)
        self.client.on_message = lambda c, u, m: self.messages.put((m.topic, m.payload, bool(m.retain)))
        properties = None
        if session_expiry_s:
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = session_expiry_s
        self.client.connect_async(url_host, port, keepalive=30, properties=properties)
        self.client.loop_start()

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if reason.is_failure:
            self._connected.put(False)
            return
        if self.subscribed:
            client.subscribe([(t, 1) for t in self.subscribed])
        else:
            self._connected.put(True)

    def wait_ready(self, timeout: float = 5.0) -> None:
        assert self._connected.get(timeout=timeout), "wire client was refused"

    def publish(self, topic: str, payload: bytes | str | dict[str, Any], retain: bool = False,
                expiry_s: int | None = None) -> None:
        """QoS 1, waits for the PUBACK; `expiry_s` sets the MQTT 5 message expiry interval."""
        data = json.dumps(payload) if isinstance(payload, dict) else payload
        properties = None
        if expiry_s is not None:
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            properties = Properties(PacketTypes.PUBLISH)
            properties.MessageExpiryInterval = expiry_s
        self.client.publish(topic, data, qos=1, retain=retain, properties=properties).wait_for_publish(5)

    async def next(self, timeout: float = 5.0) -> tuple[str, bytes, bool]:
        return await asyncio.to_thread(self.messages.get, True, timeout)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class Gate:
    """A TCP forwarder in front of the broker that the test can shut and open: shut refuses new connections and cuts
    the live ones (a network outage for just the clients behind it)."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.open = True
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    async def start(self) -> "Gate":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()
                self._writers.discard(dst)

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def shut(self) -> None:
        self.open = False
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def close(self) -> None:
        self.shut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def gates(broker: MosquittoBroker) -> AsyncIterator[Callable[..., Any]]:
    """`await gate()` → a started Gate in front of the test broker, closed at teardown."""
    made: list[Gate] = []

    async def make(target: MosquittoBroker | None = None) -> Gate:
        b = target or broker
        gate = await Gate(b.host, b.port).start()
        made.append(gate)
        return gate

    try:
        yield make
    finally:
        for gate in made:
            await gate.close()


@pytest.fixture
def wire(request: pytest.FixtureRequest) -> Iterator[Callable[..., WireClient]]:
    """`wire(subscribe=[...], **kw)` → a connected WireClient, closed at teardown."""
    made: list[WireClient] = []

    def make(*, subscribe: tuple[str, ...] | list[str] = (), target: MosquittoBroker | None = None,
             **kw: Any) -> WireClient:
        b = target or request.getfixturevalue("broker")
        client = WireClient(b.host, b.port, subscribe=subscribe, **kw)
        made.append(client)
        client.wait_ready()
        return client

    try:
        yield make
    finally:
        for client in made:
            client.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this folder's tests `broker`: all but the protocol's and the backoff's start their own mosquitto (some without the
    plugin's `broker` fixture: TLS, users)."""
    here = Path(__file__).parent
    for item in items:
        path = Path(item.fspath)
        if here in path.parents and path.name not in ("test_protocol.py", "test_backoff.py", "test_fleet_figures.py"):
            item.add_marker(pytest.mark.broker)
