"""Checks of the network services: the MQTT broker (with the credentials) and the LLM endpoint (streaming)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

from ..config import Settings
from .verdict import Verdict, fail, fmt_ms, ok, skip, warn

SLOW_TTFT_MS = 2000.0  # a first token later than this makes every spoken answer feel slow
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
                              ca_file=str(mqtt.ca_file) if mqtt.ca_file else None, protocol=mqtt.protocol,
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
    return ok(f"{mqtt.url} as {user}: session in {fmt_ms(connect_ms)} (MQTT {mqtt.protocol}"
              f"{', TLS' if url.tls else ''})")


def _llm_failure(fault: Any, settings: Settings) -> Verdict:
    llm = settings.llm
    code, message = fault.code, fault.message
    if code == "connect":
        return fail(f"cannot connect to {llm.base_url}: {message}",
                    "is the server running and reachable from here? check llm.base_url (usually ends in /v1)")
    if code in ("timeout", "first_token_timeout"):
        return fail(f"{llm.base_url} did not answer within the timeouts (connect {llm.connect_timeout_s:g} s, "
                    f"first token {llm.first_token_timeout_s:g} s, between chunks {llm.read_timeout_s:g} s)",
                    "the server is up but stalled or still loading the model; check its log, or raise "
                    "llm.first_token_timeout_s")
    if code in ("http_401", "http_403"):
        return fail(f"the endpoint refused the API key ({code.replace('_', ' ').upper()}): {message}",
                    "set OPENAI_API_KEY in the environment (secrets are never read from the TOML profile)")
    if code == "http_404":
        return fail(f"HTTP 404: {message}", f"check llm.base_url (…/v1) and llm.model {llm.model!r} "
                    f"(`curl {llm.base_url.rstrip('/')}/models`)")
    if code == "http_429":
        return fail(f"rate limited or out of quota (HTTP 429): {message}", "check the account's quota and limits")
    if code.startswith("http_"):
        return fail(f"HTTP {code[5:]}: {message}", "see the server's log")
    return fail(f"the endpoint does not stream chat completions properly ({code}: {message})",
                "the runtime needs an OpenAI-compatible streaming /chat/completions (SSE chunks with a finish "
                "reason, then data: [DONE])")


async def check_llm(settings: Settings) -> Verdict:
    """A streamed 1-token completion against llm.base_url; reports the time to the first token."""
    llm = settings.llm
    if not settings.llm_online:
        return warn("offline: only the deterministic gate answers",
                    "set llm.base_url (or OPENAI_BASE_URL) to an OpenAI-compatible endpoint, and OPENAI_API_KEY "
                    "if it needs one")
    from ..agent.llm import CallStats, ChatClient, LLMFault

    client = ChatClient(base_url=llm.base_url, api_key=llm.api_key.get_secret_value() if llm.api_key else None,
                        connect_timeout_s=llm.connect_timeout_s, read_timeout_s=llm.read_timeout_s,
                        first_token_timeout_s=llm.first_token_timeout_s, include_usage=False)
    stats = CallStats(purpose="doctor")
    try:
        async for _ in client.stream(stats, model=llm.model, messages=[{"role": "user", "content": "Say OK."}],
                                     sampling={"max_tokens": 1}):
            pass
    except LLMFault as exc:
        return _llm_failure(exc, settings)
    finally:
        await client.aclose()
    ttft = stats.ttft_ms if stats.ttft_ms is not None else stats.first_chunk_ms
    what = f"{llm.model} at {llm.base_url}"
    if ttft is not None and ttft > SLOW_TTFT_MS:
        return warn(f"{what} streams, but the first token took {fmt_ms(ttft)}",
                    "every spoken answer waits this long: use a closer or faster endpoint, or a smaller model")
    return ok(f"{what} streams; first token in {fmt_ms(ttft)}")
