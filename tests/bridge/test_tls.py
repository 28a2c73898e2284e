"""TLS and connection failures on a real mosquitto with a TLS listener and a password file: what retrying cannot fix
stops with one line naming the cause (before the first good connection); refused is said at once and retried."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from firmware_bridge.client import BridgeAuthError, BridgeClient, BridgeError, ConnectionState
from firmware_bridge.endpoint import BridgeUnreachable
from toy_runtime.testing.broker import MosquittoBroker, TestCerts, free_port, make_test_certs

from .conftest import make_config, start_broker

USERS = {"toy1": "toy1-secret"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return make_test_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    """A CA that did not sign the broker's certificate."""
    return make_test_certs(tmp_path_factory.mktemp("other"))


@pytest.fixture(scope="module")
def tls_broker(certs: TestCerts) -> Iterator[MosquittoBroker]:
    broker = start_broker(tls=certs, users=USERS)
    try:
        yield broker
    finally:
        broker.close()


def tls_config(broker: MosquittoBroker, **kw):
    return make_config(broker.url, username="toy1", password="toy1-secret", **kw)


async def gives_up(client: BridgeClient) -> BridgeError:
    """Start `client`, expect a permanent failure, and check that paho's retry thread really ended."""
    await client.start()
    thread = client._client._thread  # paho's network thread: gone once the retries stopped
    try:
        with pytest.raises(BridgeError) as err:
            await client.wait_connected(30)
        assert client.state is ConnectionState.REJECTED
        if thread is not None:
            await asyncio.to_thread(thread.join, 30)
            assert not thread.is_alive()
        return err.value
    finally:
        await client.stop()


async def test_right_ca_and_password_connect(tls_broker: MosquittoBroker, certs: TestCerts, endpoints):
    client = await endpoints(BridgeClient(tls_config(tls_broker, ca_file=str(certs.ca_file))))
    assert client.state is ConnectionState.CONNECTED


async def test_wrong_ca_stops_with_the_cause(tls_broker: MosquittoBroker, other_ca: TestCerts):
    error = await gives_up(BridgeClient(tls_config(tls_broker, ca_file=str(other_ca.ca_file))))
    assert error.code == "tls_certificate"
    assert "not trusted" in error.message and str(other_ca.ca_file) in error.message
    assert "\n" not in error.message


async def test_no_ca_file_means_system_cas_and_says_so(tls_broker: MosquittoBroker):
    error = await gives_up(BridgeClient(tls_config(tls_broker)))
    assert error.code == "tls_certificate" and "system CAs" in error.message


async def test_plain_url_to_the_tls_port_says_use_mqtts(tls_broker: MosquittoBroker):
    url = f"mqtt://{tls_broker.host}:{tls_broker.port}"
    error = await gives_up(BridgeClient(make_config(url, username="toy1", password="toy1-secret")))
    assert error.code == "tls_required" and "mqtts://" in error.message


async def test_tls_url_to_a_plain_port_says_use_mqtt(broker: MosquittoBroker, certs: TestCerts):
    url = f"mqtts://{broker.host}:{broker.port}"
    error = await gives_up(BridgeClient(make_config(url, ca_file=str(certs.ca_file))))
    assert error.code == "tls_not_spoken" and "mqtt://" in error.message


@pytest.mark.parametrize("kind", ["missing", "not_a_certificate"])
async def test_unusable_ca_file_fails_at_start(tls_broker: MosquittoBroker, tmp_path: Path, kind: str):
    ca = tmp_path / "ca.pem"
    if kind == "not_a_certificate":
        ca.write_text("hello\n")
    client = BridgeClient(tls_config(tls_broker, ca_file=str(ca)))
    with pytest.raises(BridgeError) as err:
        await client.start()
    assert err.value.code == "tls_config" and str(ca) in err.value.message
    await client.stop()


async def test_bad_password_over_tls_is_an_auth_failure(tls_broker: MosquittoBroker, certs: TestCerts):
    client = BridgeClient(make_config(tls_broker.url, username="toy1", password="wrong", ca_file=str(certs.ca_file)))
    await client.start()
    try:
        with pytest.raises(BridgeAuthError):
            await client.wait_connected(30)
        assert client.state is ConnectionState.AUTH_FAILED
    finally:
        await client.stop()


async def test_refused_is_said_at_once_and_retried_until_the_broker_comes(certs: TestCerts):
    port = free_port()
    client = BridgeClient(make_config(f"mqtts://127.0.0.1:{port}", username="toy1", password="toy1-secret",
                                      ca_file=str(certs.ca_file)))
    await client.start()
    broker = None
    try:
        with pytest.raises(BridgeUnreachable) as err:  # not a TimeoutError: the first refused attempt says so
            await client.wait_connected(30, fail_fast=True)
        assert err.value.code == "refused" and "refused" in err.value.message
        assert client.state is ConnectionState.CONNECTING  # still trying
        broker = await asyncio.to_thread(start_broker, port=port, tls=certs, users=USERS)
        await client.wait_connected(30)
    finally:
        await client.stop()
        if broker is not None:
            broker.close()


async def test_a_tls_broker_that_goes_away_after_a_good_connection_is_retried(certs: TestCerts, endpoints):
    broker = await asyncio.to_thread(start_broker, tls=certs, users=USERS)
    try:
        client = await endpoints(BridgeClient(tls_config(broker, ca_file=str(certs.ca_file))))
        await asyncio.to_thread(broker.stop)
        async with asyncio.timeout(30):
            while client.state is ConnectionState.CONNECTED:
                await client._state_changed.wait()
        assert client.state is ConnectionState.RECONNECTING
        await asyncio.to_thread(broker.start)
        await client.wait_connected(30)
        assert client.stats.connects == 2 and client.error is None
    finally:
        broker.close()


# --- the CLI: one line, exit 2 -------------------------------------------------------------------------------------


def run_chat(url: str, tmp_path: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
    env.update(TOY_STATE_DIR=str(tmp_path), TOY_MQTT__USERNAME="toy1", **env_extra)
    return subprocess.run([sys.executable, "-m", "toy_runtime", "chat", "--mqtt-url", url, "--device-id", "toy1"],
                          input="hello\n", capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("case", ["wrong_ca", "plain_url", "bad_password"])
def test_chat_stops_with_one_line_and_exit_2(tls_broker: MosquittoBroker, certs: TestCerts, other_ca: TestCerts,
                                             tmp_path: Path, case: str):
    url, ca, password, expected = {
        "wrong_ca": (tls_broker.url, other_ca.ca_file, "toy1-secret", "not trusted"),
        "plain_url": (f"mqtt://{tls_broker.host}:{tls_broker.port}", certs.ca_file, "toy1-secret", "mqtts://"),
        "bad_password": (tls_broker.url, certs.ca_file, "wrong", "bad credentials"),
    }[case]
    proc = run_chat(url, tmp_path, TOY_MQTT__CA_FILE=str(ca), TOY_MQTT__PASSWORD=password)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "toy1-secret" not in proc.stderr


async def test_device_link_warns_refused_at_once_and_keeps_running(tmp_path: Path, caplog):
    from toy_runtime.app.runtime import build_runtime
    from toy_runtime.config import load_settings, with_updates
    from toy_runtime.app.firmware_link import start_device_link
    from toy_runtime.audit import MemoryAudit

    settings = with_updates(load_settings(env={"TOY_STATE_DIR": str(tmp_path)}),
                            mqtt={"url": f"mqtt://127.0.0.1:{free_port()}", "device_id": "toy1"})
    audit = MemoryAudit()
    runtime = build_runtime(settings, audit=audit)
    with caplog.at_level(logging.WARNING):
        link = await start_device_link(runtime, connect_timeout_s=60)  # returns at the first refusal, not at 60 s
    try:
        assert audit.of("mqtt.not_connected_yet")[0]["reason"] == "refused"
        warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) == 1 and warned[0].levelno == logging.WARNING  # one line, from the bridge
        assert "refused" in warned[0].getMessage() and "retrying" in warned[0].getMessage()
        assert link.client.state is ConnectionState.CONNECTING
    finally:
        await link.aclose()
        await runtime.aclose()
