"""Check of the MQTT broker (with the credentials); the LLM endpoint's check is in `llm.py`."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

from ..config import Settings
from .verdict import Verdict, fail, fmt_ms, ok, skip, warn

BROKER_TCP_TIMEOUT_S = 3.0
BROKER_SESSION_TIMEOUT_S = 5.0


def _broker_probe(config: Any) -> Any:
    """A bare MQTT endpoint: connects with the given credentials and publishes nothing (see the module doc)."""
    from firmware_bridge.endpoint import MqttEndpoint

    class BrokerProbe(MqttEndpoint):
        role = "doctor"

    return BrokerProbe(config)


async def check_broker(settings: Settings) -> Verdict:
    """TCP to the broker, then an MQTT session with the configured credentials (mqtt.url set only)."""
    mqtt = settings.mqtt
    if not mqtt.url:
        return skip("mqtt.url is not set: the firmware bridge is off")
    from firmware_bridge import BridgeAuthError, BridgeConfig, BridgeError, parse_mqtt_url

    try:
        url = parse_mqtt_url(mqtt.url)
    except ValueError as exc:
        return fail(str(exc), "mqtt.url must look like mqtt://host:1883 or mqtts://host:8883")
    where = f"{url.host}:{url.port}"
    unreachable_fix = ("is the broker running (`systemctl status mosquitto`)? check mqtt.url, the host's "
                       "listener (mosquitto `listener 1883`) and the firewall")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(url.host, url.port), BROKER_TCP_TIMEOUT_S)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    except TimeoutError:
        return fail(f"{where} did not accept a TCP connection within {BROKER_TCP_TIMEOUT_S:g} s", unreachable_fix)
    except OSError as exc:
        return fail(f"cannot reach {where}: {exc.strerror or exc}", unreachable_fix)
    try:
        config = BridgeConfig(url=mqtt.url, device_id=mqtt.device_id, username=mqtt.username, password=mqtt.password,
                              password_file=str(mqtt.password_file) if mqtt.password_file else None, ca_file=str(mqtt.ca_file) if mqtt.ca_file else None, protocol=mqtt.protocol,
                              keepalive_s=mqtt.keepalive_s, client_id=f"doctor-{mqtt.device_id}-{uuid.uuid4().hex[:6]}")
        probe = _broker_probe(config)
    except ImportError as exc:
        return fail(str(exc), "pip install paho-mqtt")
    user = mqtt.username or url.username or "anonymous"
    t0 = time.perf_counter()
    try:
        await probe.start()
        await probe.wait_connected(timeout=BROKER_SESSION_TIMEOUT_S)
        connect_ms = (time.perf_counter() - t0) * 1000
    except BridgeAuthError as exc:
        return fail(f"bad credentials: {exc.message}",
                    "check mqtt.username and TOY_MQTT__PASSWORD against the broker's password file "
                    "(mosquitto_passwd); the password is read only from the environment")
    except BridgeError as exc:
        if exc.code == "password_file":
            return fail(exc.message, "mqtt.password_file must name a file readable by the runtime holding only the "
                                     "password (or unset it and use TOY_MQTT__PASSWORD)")
        if exc.code.startswith("tls"):  # certificate, handshake, or a scheme that does not match the listener
            return fail(exc.message, "mqtt.ca_file must be the CA that signed the broker's certificate, and the "
                                     "scheme must match the listener: mqtts:// for TLS, mqtt:// for plain")
        return fail(f"the broker refused the session: {exc.message}",
                    "try mqtt.protocol = \"3.1.1\" for an old broker; check the broker log")
    except TimeoutError:
        tls_hint = ("mqtts: check mqtt.ca_file and that the certificate names this host" if url.tls else
                    "is this port really MQTT (mqtts:// for a TLS listener)?")
        return fail(f"TCP to {where} works but no MQTT session within {BROKER_SESSION_TIMEOUT_S:g} s", tls_hint)
    finally:
        await probe.stop()
    detail = (f"{mqtt.url} as {user} ({credentials_source(settings)}): session in {fmt_ms(connect_ms)} "
              f"(MQTT {mqtt.protocol}{', TLS' if url.tls else ''})")
    return credentials_verdict(settings, user, detail)


def credentials_source(settings: Settings) -> str:
    """Where the toy's broker password comes from, never the password itself."""
    mqtt = settings.mqtt
    if mqtt.password is not None:
        return "password from TOY_MQTT__PASSWORD"
    if mqtt.password_file is not None:
        return f"password from {mqtt.password_file}"
    return "no password"


def credentials_verdict(settings: Settings, user: str, detail: str) -> Verdict:
    """OK when the toy logs in with its own identity; WARN when a session worked without one, because then the
    broker cannot confine this toy to `toy/<its id>/` (configs/mosquitto/fleet.acl keys everything on the user name)."""
    mqtt = settings.mqtt
    fix = ("give each toy its own broker account: [mqtt] username = device_id and TOY_MQTT__PASSWORD (or "
           "[mqtt] password_file); the broker refuses anonymous clients (configs/mosquitto/fleet.conf)")
    if user == "anonymous":
        return warn(f"{detail}; anonymous: the broker cannot tell this toy from any other client", fix)
    if mqtt.password is None and mqtt.password_file is None:
        return warn(f"{detail}; no password is set for {user}", fix)
    if user != mqtt.device_id:
        return warn(f"{detail}; user {user} is not the device id {mqtt.device_id}: the per-toy ACL (%u) will not "
                    "match this toy's topics", fix)
    return ok(detail)
