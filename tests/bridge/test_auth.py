"""Credentials and the shipped per-device ACL (configs/mosquitto/acl) on a real mosquitto."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from firmware_bridge import protocol as p
from firmware_bridge.client import BridgeAuthError, BridgeClient, ConnectionState
from firmware_bridge.firmware import FirmwareClient
from toy_runtime.testing.broker import MosquittoBroker, shipped_broker_config, wait_for_listener

from .conftest import make_config, start_broker

ACL = (Path(__file__).resolve().parents[2] / "configs" / "mosquitto" / "acl").read_text()
USERS = {"toy1": "toy1-secret", "toy2": "toy2-secret", "app": "app-secret"}


@pytest.fixture
def secured() -> MosquittoBroker:
    broker = start_broker(users=USERS, acl=ACL)
    try:
        yield broker
    finally:
        broker.close()


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_bad_password_fails_clearly_and_stops_retrying(secured: MosquittoBroker, protocol: str):
    client = BridgeClient(make_config(secured.url, username="toy1", password="wrong", protocol=protocol))
    await client.start()
    try:
        with pytest.raises(BridgeAuthError) as err:
            await client.wait_connected(5)
        assert err.value.code == "auth_failed"
        assert "toy1" in err.value.message
        assert client.state is ConnectionState.AUTH_FAILED
        await asyncio.sleep(0.6)  # more than 10 retry periods at the test backoff (0.05 s)
        assert secured.log_text().count("not authorised") == 1
        with pytest.raises(BridgeAuthError):  # still the same clear answer later
            await client.wait_connected(0.1)
    finally:
        await client.stop()


async def test_anonymous_client_is_refused(secured: MosquittoBroker):
    client = BridgeClient(make_config(secured.url))
    await client.start()
    try:
        started = time.perf_counter()
        with pytest.raises(BridgeAuthError):
            await client.wait_connected(5)
        assert time.perf_counter() - started < 5
    finally:
        await client.stop()


async def test_acl_lets_the_app_command_its_toy_but_nobody_else(secured: MosquittoBroker, endpoints, wire):
    runtime = await endpoints(BridgeClient(make_config(secured.url, username="toy1", password="toy1-secret")))
    firmware = await endpoints(FirmwareClient(make_config(secured.url, username="toy1", password="toy1-secret")))
    app = wire(target=secured, username="app", password="app-secret", subscribe=["toy/+/command/result"])
    toy2 = wire(target=secured, username="toy2", password="toy2-secret")

    def command(command_id: str) -> bytes:
        return p.encode(p.Command(command_id=command_id, name="session.end", actor="app"))

    toy2.publish("toy/toy1/command", command("from-toy2"))  # another toy: denied
    firmware_forgery = await firmware.send_raw(p.COMMAND, command("from-firmware"))  # the toy itself: read-only
    assert firmware_forgery is True  # sent, but the broker drops it
    toy2.publish("toy/toy1/button", p.encode(p.ButtonEvent(action="press")))  # another toy's button: denied
    app.publish("toy/toy1/command", command("from-app"))
    assert (await asyncio.wait_for(runtime.next_command(), 5)).command_id == "from-app"

    await firmware.press("click")
    assert (await asyncio.wait_for(runtime.next_button(), 5)).seq == 1  # toy2's press never arrived

    await runtime.publish_command_result("from-app", "ok")
    _, payload, _ = await app.next()
    assert p.parse_command_result(payload).command_id == "from-app"
    assert runtime.stats.malformed == 0


async def test_shipped_broker_config_starts_and_serves_tls(tmp_path: Path, endpoints):
    """configs/mosquitto/mosquitto.conf with its paths pointed into tmp_path and free ports: mosquitto accepts it and
    a device logs in over TLS with the shipped ACL."""
    import subprocess

    from toy_runtime.testing.broker import free_port, make_test_certs, mosquitto_binary
    from toy_runtime.testing.services import unavailable

    binary = mosquitto_binary()
    if binary is None:
        unavailable("mosquitto not installed")
    certs = await asyncio.to_thread(make_test_certs, tmp_path / "certs")
    passwd = tmp_path / "toy.passwd"
    passwd.write_text("toy1:toy1-secret\n")
    subprocess.run(["mosquitto_passwd", "-U", str(passwd)], check=True)
    (tmp_path / "toy.acl").write_text(ACL)
    plain, tls = free_port(), free_port()
    conf = shipped_broker_config("mosquitto.conf", tmp_path,
                                 listeners={"listener 1883 127.0.0.1": f"listener {plain} 127.0.0.1",
                                            "listener 8883": f"listener {tls} 127.0.0.1"},
                                 files={"/etc/mosquitto/certs/server.pem": certs.cert_file,
                                        "/etc/mosquitto/certs/server.key": certs.key_file,
                                        "/etc/mosquitto/certs/ca.pem": certs.ca_file,
                                        "/etc/mosquitto/toy.passwd": passwd,
                                        "/etc/mosquitto/toy.acl": tmp_path / "toy.acl"})
    proc = subprocess.Popen([binary, "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        await wait_for_listener(proc, tls, tries=200)
        url = f"mqtts://127.0.0.1:{tls}"
        runtime = await endpoints(BridgeClient(make_config(url, username="toy1", password="toy1-secret",
                                                           ca_file=str(certs.ca_file))))
        firmware = await endpoints(FirmwareClient(make_config(url, username="toy1", password="toy1-secret",
                                                              ca_file=str(certs.ca_file))))
        await firmware.press("click")
        assert (await asyncio.wait_for(runtime.next_button(), 5)).action == "click"
        await runtime.stop()
        await firmware.stop()
    finally:
        proc.terminate()
        proc.wait(5)
        proc.stderr.close()
