"""The connection machinery shared by both ends of the protocol: a paho-mqtt 2.x client on its own network thread,
bridged into asyncio.

What it guarantees (docs/mqtt.md):
- `connect_async` + `loop_start`; reconnects with a bounded doubling backoff; resubscribes in `on_connect`.
- "Ready" means subscribed: only after the SUBACK does it publish presence, the retained mirror and the outbox, so
  anything paho itself re-sends from the previous connection reaches the broker before our newer values.
- Retained topics are mirrored: the latest value per topic is re-published on every (re)connect, so a broker that
  restarted without persistence gets them back. Non-retained publishes made while disconnected wait in a bounded outbox
  (oldest dropped, counted) and are flushed in order on reconnect.
- A refused CONNACK for bad credentials stops the retries: state AUTH_FAILED, `wait_connected()` raises.
- Before the first good connection, an untrusted certificate, a failed TLS handshake or a URL in the wrong dialect
  (plain to a TLS port or back) stops the retries too: state REJECTED, one line naming the cause (failures.py).
  Refused, reset, timed out: retried, one warning per cause per outage; `wait_connected(fail_fast=True)` says so at once.
- Inbound messages are parsed on the network thread; bad ones are logged (one line, rate-limited: ratelog.py), counted
  and dropped without killing the loop;
  good ones are handed to the asyncio loop (call_soon_threadsafe) into bounded queues (inbox.py; oldest dropped).
- TCP_NODELAY on the socket (request/reply over loopback costs ~0.3 ms instead of ~40-90 ms with Nagle).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import functools
import logging
import socket
import threading
import time
import uuid
from typing import Any

from .backoff import Backoff
from .config import BridgeConfig, MqttUrl, PasswordFileError
from .failures import ConnectFailure, classify, closed_before_connack
from .inbox import EndpointStats, Inbox
from .protocol import MAX_PAYLOAD_BYTES, ProtocolError, Topics, clip
from .ratelog import LimitedLog

log = logging.getLogger("firmware_bridge")

_INSTALL_HINT = "paho-mqtt is not installed: pip install 'paho-mqtt>=2.0'"

# CONNACK reasons that retrying cannot fix (compared by name: v3.1.1 codes are mapped to v5 names by paho).
# A payload at the protocol's limit plus a fixed header, a topic under `toy/<id>/` and v5 properties.
MAX_PACKET_BYTES = MAX_PAYLOAD_BYTES + 1024

_AUTH_REASONS = {"Bad user name or password", "Not authorized", "Bad authentication method", "Banned"}
_FATAL_REASONS = {"Unsupported protocol version", "Client identifier not valid"}


def _paho() -> Any:
    try:
        import paho.mqtt.client as mqtt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_INSTALL_HINT) from exc
    return mqtt


@functools.cache
def _client_class(mqtt: Any) -> Any:
    _CS = mqtt._ConnectionState  # paho's connection states, which its reconnect wait checks
    class Client(mqtt.Client):
        """paho's client, remembering why the last connection attempt failed (`on_connect_fail` does not say)."""

        last_connect_error: BaseException | None = None
        backoff: Backoff | None = None  # set by the endpoint: our jittered delays instead of paho's doubling

        def _reconnect_wait(self) -> None:
            # paho's own wait doubles without jitter: after a broker restart every toy would retry in lockstep.
            # Same exit conditions as paho's (a stop or disconnect ends the wait at once).
            if self.backoff is None:
                return super()._reconnect_wait()
            deadline = time.monotonic() + self.backoff.next_delay()
            while (self._state not in (_CS.MQTT_CS_DISCONNECTING, _CS.MQTT_CS_DISCONNECTED)
                   and not self._thread_terminate and (remaining := deadline - time.monotonic()) > 0):
                time.sleep(min(remaining, 0.5))

        def reconnect(self) -> Any:
            try:
                return super().reconnect()
            except OSError as exc:
                self.last_connect_error = exc
                raise

        def stop_retrying(self) -> None:
            """End the network loop for good, also from `on_disconnect` (where paho would mark the connection lost
            after the callback and retry; it has no public switch once started)."""
            self._reconnect_on_failure = False
            self.disconnect()

    return Client


def _expiry_of(message: Any) -> int | None:
    """The remaining MQTT 5 message expiry interval (s) the broker delivered with `message`, else None."""
    properties = getattr(message, "properties", None)
    return getattr(properties, "MessageExpiryInterval", None) if properties is not None else None


class ConnectionState(enum.StrEnum):
    """Where an endpoint's connection is."""

    STOPPED = "stopped"
    CONNECTING = "connecting"  # first attempt(s), not yet ready
    CONNECTED = "connected"  # CONNACK ok and subscriptions acknowledged
    RECONNECTING = "reconnecting"  # lost the connection, paho is retrying with backoff
    AUTH_FAILED = "auth_failed"  # bad credentials: retries stopped
    REJECTED = "rejected"  # other permanent refusal (CONNACK, TLS, wrong dialect): retries stopped


class BridgeError(RuntimeError):
    """The endpoint cannot (or can no longer) talk to the broker."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class BridgeAuthError(BridgeError):
    """The broker refused the credentials; retrying would not help."""


class BridgeUnreachable(BridgeError):
    """The last attempt failed in a way that may pass (refused, reset, timed out); the endpoint keeps retrying."""


class MqttEndpoint:
    """Base of BridgeClient (runtime side) and FirmwareClient (firmware side). Subclasses say what to subscribe to,
    what their last will is and how to decode messages (`_on_payload`, called on the network thread)."""

    role = "endpoint"

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.topics = Topics(config.device_id, config.topic_prefix)
        self.stats = EndpointStats()
        self._mqtt = _paho()
        self._client: Any = None
        self._broker: MqttUrl | None = None  # the resolved URL and credentials of the current start()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()  # guards _ready, the outbox and the retained mirror
        self._ready = False  # True from SUBACK until the connection drops: publishes go straight to paho
        self._outbox: collections.deque[tuple[str, bytes]] = collections.deque()
        self._retained: dict[str, bytes] = {}  # topic → latest retained payload (re-published on every connect)
        self._unacked: collections.deque[Any] = collections.deque()  # MQTTMessageInfo of publishes not yet acked
        self._sub_mid: int | None = None
        self._subscribed = False  # network thread: the broker acknowledged every subscription in this session
        self.backoff = Backoff(config.reconnect_min_delay_s, max(config.reconnect_max_delay_s,
                                                                 config.reconnect_min_delay_s))
        self._connect_failures = 0
        self._connected_once = False  # network thread: a good CONNACK was seen since start()
        self._connack_seen = False  # network thread: in the current attempt
        self._warned: str | None = None  # failure code already logged in this outage
        self._failure: BridgeError | None = None  # the latest transient failure (loop side), None once connected
        self._stopping = False
        self._gave_up = False  # network-thread flag; `_error` is set on the loop together with the state
        self._used = False
        self._state = ConnectionState.STOPPED
        self._state_changed = asyncio.Event()
        self._error: BridgeError | None = None
        self._waiting = 0  # callers inside wait_connected(): a give-up error is theirs to report
        self._inboxes: list[Inbox[Any]] = []
        # anyone on the broker can publish garbage to our topics: one line per message, and a flood is summed up
        self._bad_log = LimitedLog(log, "dropped-message")

    # --- subclass hooks ---------------------------------------------------------------------------------------------

    def _subscriptions(self) -> list[str]:
        return []

    def _will(self) -> tuple[str, bytes] | None:
        """(topic, payload) of the retained last will, if any."""
        return None

    def _on_ready_publish(self) -> list[tuple[str, bytes]]:
        """Retained messages to publish first on every connect (e.g. presence `online`)."""
        return []

    def _on_payload(self, topic: str, payload: bytes, retained: bool, expiry_s: int | None = None) -> None:
        """Decode one inbound message on the network thread; use `_deliver` to hand it to asyncio. `expiry_s` is
        what is left of the sender's MQTT 5 message expiry interval (None: none set, or MQTT 3.1.1)."""

    # --- lifecycle --------------------------------------------------------------------------------------------------

    @property
    def device_id(self) -> str:
        return self.config.device_id

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def error(self) -> BridgeError | None:
        """Why the endpoint gave up (AUTH_FAILED / REJECTED), else None."""
        return self._error

    def _resolved(self) -> MqttUrl:
        """The broker URL and credentials resolved by the current start() (read once: a password file too)."""
        return self._broker if self._broker is not None else self.config.broker()

    def _inbox(self, name: str) -> Inbox[Any]:
        inbox: Inbox[Any] = Inbox(name, self.config.inbox_limit, self.stats)
        self._inboxes.append(inbox)
        return inbox

    def _build_client(self) -> Any:
        mqtt = self._mqtt
        cfg = self.config
        try:
            broker = self._broker = cfg.broker()  # read once: the failure paths reuse it on the network thread
        except PasswordFileError as exc:
            raise BridgeError("password_file", str(exc)) from None
        if cfg.client_id:
            client_id = cfg.client_id
        elif cfg.session_expiry_s:
            client_id = f"{self.role}-{cfg.device_id}"  # a resumable session needs the same id every time
        else:
            client_id = f"{self.role}-{cfg.device_id}-{uuid.uuid4().hex[:8]}"
        client_class = _client_class(mqtt)
        if cfg.protocol == "5":
            client = client_class(
                callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5
            )
        else:
            client = client_class(
                callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                protocol=mqtt.MQTTv311, clean_session=cfg.session_expiry_s == 0,
            )
        client.suppress_exceptions = True  # a bug in a callback must not kill the network thread
        paho_log = logging.getLogger("firmware_bridge.paho")
        if paho_log.isEnabledFor(logging.DEBUG):  # paho logs routine shutdowns as errors: only when debugging
            client.enable_logger(paho_log)
        if broker.username:
            client.username_pw_set(broker.username, broker.password)
        if broker.tls:
            try:
                client.tls_set(ca_certs=cfg.ca_file, certfile=cfg.cert_file, keyfile=cfg.key_file)
            except FileNotFoundError as exc:
                raise BridgeError("tls_config", f"TLS: {exc.filename or cfg.ca_file} does not exist") from None
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: not a PEM certificate
                files = ", ".join(f for f in (cfg.ca_file, cfg.cert_file, cfg.key_file) if f) or "system CAs"
                reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
                raise BridgeError("tls_config", f"TLS: cannot load {files}: {reason}") from None
            if cfg.tls_insecure:
                client.tls_insecure_set(True)
        will = self._will()
        if will:
            client.will_set(will[0], will[1], qos=1, retain=True)
        client.reconnect_delay_set(cfg.reconnect_min_delay_s, cfg.reconnect_max_delay_s)
        client.backoff = self.backoff
        client.on_socket_open = self._on_socket_open
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_connect_fail = self._on_connect_fail
        return client

    async def start(self) -> None:
        """Start connecting in the background (returns at once; see `wait_connected`). Once per endpoint."""
        if self._client is not None or self._used:
            raise RuntimeError(f"{self.role} can start once (its inbound streams end at stop): make a new one")
        self._used = True
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._error = None
        self._client = self._build_client()  # BridgeError("tls_config"/"password_file") for an unusable file
        broker = self._resolved()
        self._set_state(ConnectionState.CONNECTING)
        properties = None
        if self.config.protocol == "5":
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            properties = Properties(PacketTypes.CONNECT)
            # the broker drops anything larger for us instead of sending it (a hostile client could publish up to
            # 256 MB to our topics); MQTT 3.1.1 has no such field: there the parser rejects it (payload_too_large)
            properties.MaximumPacketSize = MAX_PACKET_BYTES
            if self.config.session_expiry_s:
                properties.SessionExpiryInterval = self.config.session_expiry_s
        # clean_start "first only": a fresh session when the process starts, resumed on reconnects.
        self._client.connect_async(broker.host, broker.port, keepalive=self.config.keepalive_s, properties=properties)
        self._client.loop_start()
        log.info("%s %s connecting to %s:%s (tls=%s, mqtt %s)", self.role, self.device_id, broker.host,
                 broker.port, broker.tls, self.config.protocol)

    async def wait_connected(self, timeout: float | None = None, *, fail_fast: bool = False) -> None:
        """Wait until connected and subscribed. Raises BridgeAuthError/BridgeError if the broker refused us for good
        or the endpoint was stopped, TimeoutError after `timeout` seconds. With `fail_fast`, a transient failure
        (refused, reset...) raises BridgeUnreachable at once; the endpoint keeps retrying in the background."""
        self._waiting += 1
        try:
            await self._wait_connected(timeout, fail_fast)
        finally:
            self._waiting -= 1

    async def _wait_connected(self, timeout: float | None, fail_fast: bool) -> None:
        async with asyncio.timeout(timeout):
            while True:
                if self._error is not None:
                    raise self._error
                if fail_fast and self._failure is not None:
                    raise self._failure
                if self._state is ConnectionState.CONNECTED:
                    return
                if self._state is ConnectionState.STOPPED:
                    raise BridgeError("stopped", f"{self.role} is not running")
                event = self._state_changed
                await event.wait()

    async def stop(self) -> None:
        """Publish the final retained messages (e.g. `offline`), disconnect cleanly, join the network thread and end
        every inbound iterator."""
        client, self._client = self._client, None
        if client is None:
            return
        self._stopping = True
        try:
            if self._ready:
                with self._lock:
                    for topic, payload in self._on_stop_publish():
                        self._track(client.publish(topic, payload, qos=1, retain=True))
                    pending = list(self._unacked)
                # paho drops packets still in its queue when its thread stops: wait for the PUBACKs first.
                await asyncio.to_thread(self._wait_published, pending, self.config.stop_timeout_s)
            elif self._outbox:
                log.warning("%s stopped while disconnected: %d queued message(s) not sent", self.role,
                            len(self._outbox))
            client.disconnect()
            await asyncio.to_thread(client.loop_stop)
        finally:
            with self._lock:
                self._ready = False
            self._set_state(ConnectionState.STOPPED)
            for inbox in self._inboxes:
                inbox.close()
            self._bad_log.flush()

    def _on_stop_publish(self) -> list[tuple[str, bytes]]:
        return []

    @staticmethod
    def _wait_published(infos: list[Any], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for info in infos:
            try:
                info.wait_for_publish(max(0.0, deadline - time.monotonic()))
            except (RuntimeError, ValueError):  # handed over while the connection was dropping: best effort
                continue

    def _track(self, info: Any) -> None:
        """Remember an in-flight QoS 1 publish (lock held); forget the acknowledged ones."""
        self._unacked.append(info)
        while self._unacked:
            try:
                if not self._unacked[0].is_published():
                    break
            except (RuntimeError, ValueError):
                # never handed over: the connection dropped between our check and paho's (paho raises for it).
                # Nothing is in flight to wait for; the retained state is published again on the next connect.
                pass
            self._unacked.popleft()

    async def __aenter__(self) -> "MqttEndpoint":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- publishing (any thread) ------------------------------------------------------------------------------------

    def _publish(self, topic: str, payload: bytes, *, retain: bool) -> bool:
        """QoS 1 publish. Returns True if handed to paho now, False if kept for the next connection (retained
        topics: latest value only; others: bounded outbox)."""
        with self._lock:
            if retain:
                self._retained[topic] = payload
            if self._ready and self._client is not None:
                # Once handed to paho a QoS 1 message survives a drop: paho re-sends it after the reconnect.
                self._track(self._client.publish(topic, payload, qos=1, retain=retain))
                self.stats.published += 1
                return True
            if not retain:
                if len(self._outbox) >= self.config.outbox_limit:
                    self._outbox.popleft()
                    self.stats.dropped_outbox += 1
                    log.warning("%s outbox full (%d): dropped the oldest message", self.role, self.config.outbox_limit)
                self._outbox.append((topic, payload))
                self.stats.queued += 1
            return False

    # --- paho callbacks (network thread) ----------------------------------------------------------------------------

    def _on_socket_open(self, client: Any, userdata: Any, sock: Any) -> None:
        self._connack_seen = False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):  # not a TCP socket (unix/websocket transports)
            pass

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        self._connack_seen = True
        if reason.is_failure:
            name = reason.getName()
            if name in _AUTH_REASONS or name in _FATAL_REASONS:
                auth = name in _AUTH_REASONS
                cls = BridgeAuthError if auth else BridgeError
                error = cls("auth_failed" if auth else "rejected",
                            f"broker refused {self.role} {self.device_id}: {name}")
                self._gave_up = True
                client.disconnect()  # ends paho's retry loop
                self._post(self._give_up, error, ConnectionState.AUTH_FAILED if auth else ConnectionState.REJECTED)
            else:
                log.warning("%s connect refused: %s (will retry)", self.role, name)
            return
        self.stats.connects += 1
        self._connect_failures = 0
        self._connected_once = True
        self._warned = None
        self.backoff.reset()
        self._post(self._note_failure, None)
        subs = self._subscriptions()
        if subs and self._subscribed and getattr(flags, "session_present", False):
            # The broker kept our session (session_expiry_s > 0, a network drop): the subscriptions are still
            # there, and QoS 1 messages queued meanwhile are coming; subscribing again would only cost a round trip.
            self.stats.resumed += 1
            self._become_ready(client)
        elif subs:
            self._subscribed = False  # a new session: nothing of ours survived on the broker
            result, mid = client.subscribe([(topic, 1) for topic in subs])
            self._sub_mid = mid
            if result != 0:
                log.warning("%s subscribe failed to send (rc=%s); waiting for reconnect", self.role, result)
        else:
            self._become_ready(client)

    def _on_connect_fail(self, client: Any, userdata: Any) -> None:
        # TCP, DNS or TLS failure while opening the connection; our client subclass kept the exception.
        self._connect_failures += 1
        error = getattr(client, "last_connect_error", None)
        failure = classify(error, self._resolved(), self.config.ca_file, probe=not self._connected_once)
        self._failed(client, failure)

    def _failed(self, client: Any, failure: ConnectFailure) -> None:
        """Give up on a permanent failure before the first good connection; otherwise retry, warning once per cause
        and outage."""
        if self._stopping or self._gave_up:
            return
        if failure.permanent and not self._connected_once:
            error = BridgeError(failure.code, f"{self.role} {self.device_id}: {failure.message}")
            self._gave_up = True
            client.stop_retrying()
            self._post(self._give_up, error, ConnectionState.REJECTED)
            return
        if self._warned != failure.code:
            self._warned = failure.code
            log.warning("%s %s: %s (retrying with backoff up to %.0fs)", self.role, self.device_id, failure.message,
                        self.config.reconnect_max_delay_s)
        self._post(self._note_failure, BridgeUnreachable(failure.code, failure.message))

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, reasons: list[Any], properties: Any) -> None:
        if mid != self._sub_mid:
            return
        refused = False
        for topic, code in zip(self._subscriptions(), reasons):
            if getattr(code, "is_failure", False):
                refused = True
                log.error("%s subscription to %s refused: %s", self.role, topic, code.getName())
        self._subscribed = not refused  # a refused one is asked again on the next connection
        self._become_ready(client)

    def _become_ready(self, client: Any) -> None:
        with self._lock:
            first = self._on_ready_publish()
            for topic, payload in first:
                self._retained[topic] = payload
            for topic, payload in self._retained.items():  # once per connection, the latest value of each
                self._track(client.publish(topic, payload, qos=1, retain=True))
            self.stats.republished += len(self._retained)
            flushed = len(self._outbox)
            while self._outbox:
                topic, payload = self._outbox.popleft()
                self._track(client.publish(topic, payload, qos=1, retain=False))
            self.stats.flushed += flushed
            self._ready = True
        if flushed:
            log.info("%s flushed %d queued message(s) after connecting", self.role, flushed)
        self._post(self._set_state, ConnectionState.CONNECTED)

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        # No lock here: paho may call this while holding its own message lock, and _publish takes ours first.
        self._ready = False
        self.stats.disconnects += 1
        if self._stopping or self._gave_up:
            return
        if not self._connack_seen:  # closed before answering CONNECT: a TLS port behind a plain URL does that
            self._failed(client, closed_before_connack(self._resolved(), probe=not self._connected_once))
            return
        log.warning("%s %s lost the broker (%s); reconnecting", self.role, self.device_id, reason)
        self._post(self._set_state, ConnectionState.RECONNECTING)

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        try:
            self._on_payload(message.topic, message.payload, bool(message.retain), _expiry_of(message))
        except ProtocolError as exc:  # e.g. a topic outside ours: one line, like any other bad message
            self._drop_bad(message.topic, exc)
        except Exception as exc:  # a bug in our decoding: never let one message kill the network thread
            self.stats.malformed += 1
            self._bad_log.error("%s dropped a message on %s: %s: %s", self.role, clip(str(message.topic), 200),
                                type(exc).__name__, clip(str(exc), 200))
            log.debug("the decoding error in full", exc_info=True)  # the traceback only when debugging

    def _drop_bad(self, topic: str, exc: ProtocolError) -> None:
        """Count and log (one line, rate-limited) a message that does not follow the protocol."""
        self.stats.malformed += 1
        self._bad_log.warning("%s dropped a bad message on %s: %s", self.role, clip(str(topic), 200), exc)

    # --- into asyncio -----------------------------------------------------------------------------------------------

    def _post(self, fn: Any, *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # loop closed between the check and the call
            pass

    def _deliver(self, inbox: Inbox[Any], item: Any) -> None:
        """Hand a decoded message to its inbox on the event loop (call from the network thread)."""
        self._post(inbox.put, item)

    def _give_up(self, error: BridgeError, state: ConnectionState) -> None:
        if self._state is ConnectionState.STOPPED:
            return
        if not self._waiting:  # a waiter gets the error raised and reports it once; otherwise say it here
            log.error("%s (not retrying)", error.message)
        self._error = error
        self._set_state(state)

    def _note_failure(self, error: BridgeError | None) -> None:
        self._failure = error
        self._wake()

    def _set_state(self, state: ConnectionState) -> None:
        if self._state is ConnectionState.STOPPED and state is not ConnectionState.CONNECTING:
            return  # a late callback after stop()
        gave_up = self._state in (ConnectionState.AUTH_FAILED, ConnectionState.REJECTED)
        if gave_up and state is not ConnectionState.STOPPED:
            return
        self._state = state
        self._wake()

    def _wake(self) -> None:
        event, self._state_changed = self._state_changed, asyncio.Event()
        event.set()
