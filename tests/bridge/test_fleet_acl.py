"""Per-toy authorization on a real mosquitto with the shipped fleet ACL (configs/mosquitto/fleet.acl rendered by
firmware_bridge.acl): a toy cannot read or command another toy, an owner's app reaches only its own toys.

mosquitto drops a denied publish silently and never delivers a denied read, so every test asserts on what arrives,
behind a barrier message that is allowed and sent afterwards on the same path (the broker handles them in order)."""

from __future__ import annotations

import asyncio
import json
import queue
from pathlib import Path

import pytest

from firmware_bridge import protocol as p
from firmware_bridge.acl import AclError, main as acl_main, render_fleet_acl
from firmware_bridge.client import BridgeClient
from toy_runtime.testing.broker import MosquittoBroker, shipped_broker_config, wait_for_listener

from .conftest import WireClient, make_config, start_broker

USERS = {"toyA": "a-secret", "toyB": "b-secret", "app-alice": "alice-secret", "app-bob": "bob-secret",
         "fleet": "fleet-secret"}
OWNERS = {"app-alice": ["toyA"], "app-bob": ["toyB"]}


@pytest.fixture
def fleet_broker() -> MosquittoBroker:
    broker = start_broker(users=USERS, acl=render_fleet_acl(OWNERS))
    try:
        yield broker
    finally:
        broker.close()


def command(command_id: str, actor: str = "app") -> bytes:
    return p.encode(p.Command(command_id=command_id, name="session.end", actor=actor))


def drain(client: WireClient) -> list[tuple[str, bytes, bool]]:
    got = []
    while True:
        try:
            got.append(client.messages.get_nowait())
        except queue.Empty:
            return got


async def until(client: WireClient, topic: str, timeout: float = 5.0) -> list[tuple[str, bytes, bool]]:
    """Every message up to and including the first on `topic` (the barrier)."""
    seen = []
    while True:
        message = await client.next(timeout)
        seen.append(message)
        if message[0] == topic:
            return seen


async def test_a_toy_cannot_read_or_command_another_toy(fleet_broker: MosquittoBroker, endpoints, wire):
    toy_a = await endpoints(BridgeClient(make_config(fleet_broker.url, "toyA", username="toyA", password="a-secret")))
    toy_b = await endpoints(BridgeClient(make_config(fleet_broker.url, "toyB", username="toyB", password="b-secret")))
    await toy_b.publish_state("listening", session_id="b-session")
    # toy A's credentials on a bare client that tries everything: read all toys, command toy B, overwrite B's state
    spy = wire(target=fleet_broker, username="toyA", password="a-secret", subscribe=["toy/#", "toy/toyB/#"])
    spy.publish("toy/toyB/command", command("from-toyA"))
    spy.publish("toy/toyB/state", json.dumps({"v": 1, "state": "speaking"}), retain=True)
    spy.publish("toy/toyB/online", "offline", retain=True)
    fleet = wire(target=fleet_broker, username="fleet", password="fleet-secret",
                 subscribe=["toy/toyB/state", "toy/toyB/online"])
    fleet.publish("toy/toyB/command", command("from-fleet", actor="fleet"))
    assert (await asyncio.wait_for(toy_b.next_command(), 5)).command_id == "from-fleet"  # toy A's never arrived

    await toy_b.publish_command_result("from-fleet", "ok")  # toy B's traffic that toy A's spy must not see
    await toy_a.publish_state("thinking")  # the barrier: toy A's own topic, which its spy may read
    seen = await until(spy, "toy/toyA/state")
    assert [topic for topic, _, _ in seen if not topic.startswith("toy/toyA/")] == []
    # B's retained values are still B's own: A's forgeries were dropped
    retained = {topic: payload for topic, payload, _ in [await fleet.next(), await fleet.next()]}
    assert p.parse_state(retained["toy/toyB/state"]).state == "listening"
    assert retained["toy/toyB/online"] == b"online"
    assert toy_a.stats.malformed == toy_b.stats.malformed == 0


async def test_a_toy_works_on_its_own_topics(fleet_broker: MosquittoBroker, endpoints, wire):
    toy_a = await endpoints(BridgeClient(make_config(fleet_broker.url, "toyA", username="toyA", password="a-secret")))
    firmware = wire(target=fleet_broker, username="toyA", password="a-secret", subscribe=["toy/toyA/state"])
    firmware.publish("toy/toyA/button", p.encode(p.ButtonEvent(action="click", seq=1)))
    assert (await asyncio.wait_for(toy_a.next_button(), 5)).seq == 1
    await toy_a.publish_state("listening")
    topic, payload, _ = await firmware.next()
    assert topic == "toy/toyA/state" and p.parse_state(payload).state == "listening"
    firmware.publish("toy/toyA/command", command("self-forged"))  # read-only even for the toy itself
    alice = wire(target=fleet_broker, username="app-alice", password="alice-secret")
    alice.publish("toy/toyA/command", command("from-alice"))
    assert (await asyncio.wait_for(toy_a.next_command(), 5)).command_id == "from-alice"


async def test_an_owner_app_commands_and_reads_only_its_own_toys(fleet_broker: MosquittoBroker, endpoints, wire):
    toy_a = await endpoints(BridgeClient(make_config(fleet_broker.url, "toyA", username="toyA", password="a-secret")))
    toy_b = await endpoints(BridgeClient(make_config(fleet_broker.url, "toyB", username="toyB", password="b-secret")))
    alice = wire(target=fleet_broker, username="app-alice", password="alice-secret",
                 subscribe=["toy/+/command/result", "toy/+/state"])
    alice.publish("toy/toyB/command", command("alice-to-b"))  # not her toy: dropped
    bob = wire(target=fleet_broker, username="app-bob", password="bob-secret")
    bob.publish("toy/toyB/command", command("bob-to-b"))
    assert (await asyncio.wait_for(toy_b.next_command(), 5)).command_id == "bob-to-b"

    await toy_b.publish_command_result("bob-to-b", "ok")
    await toy_b.publish_state("speaking")
    alice.publish("toy/toyA/command", command("alice-to-a"))
    assert (await asyncio.wait_for(toy_a.next_command(), 5)).command_id == "alice-to-a"
    await toy_a.publish_command_result("alice-to-a", "ok")  # the barrier
    seen = await until(alice, "toy/toyA/command/result")
    assert [topic for topic, _, _ in seen if "toyB" in topic] == []
    assert p.parse_command_result(seen[-1][1]).command_id == "alice-to-a"
    assert "toyB" not in "".join(topic for topic, _, _ in drain(alice))


def test_the_acl_renderer_refuses_what_would_widen_access(tmp_path: Path, capsys):
    with pytest.raises(AclError):
        render_fleet_acl({"toyA": ["toyA"]})  # an owner named like a toy would get that toy's patterns
    with pytest.raises(AclError):
        render_fleet_acl({"app-x": ["toy/#"]})  # a wildcard is not a device id
    with pytest.raises(AclError):
        render_fleet_acl({"app x": ["toyA"]})
    owners = tmp_path / "owners.toml"
    owners.write_text('[owners]\n"app-alice" = ["toyA", "toyC"]\n')
    assert acl_main([str(owners)]) == 0
    out = capsys.readouterr().out
    assert "user app-alice\ntopic write toy/toyA/command\n" in out and "topic write toy/toyC/command" in out
    owners.write_text('[owners]\n"app-alice" = "toyA"\n')
    assert acl_main([str(owners)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


async def test_the_shipped_fleet_config_starts_and_confines_a_toy_over_tls(tmp_path: Path, endpoints):
    """configs/mosquitto/fleet.conf with its paths pointed into tmp_path, a password file made by
    `mosquitto_passwd -b` and the rendered ACL: mosquitto accepts it, a toy logs in over TLS and cannot read another's
    retained state."""
    import subprocess

    from firmware_bridge.firmware import FirmwareClient
    from toy_runtime.testing.broker import free_port, make_test_certs, mosquitto_binary
    from toy_runtime.testing.services import unavailable

    binary = mosquitto_binary()
    if binary is None:
        unavailable("mosquitto not installed")
    certs = await asyncio.to_thread(make_test_certs, tmp_path / "certs")
    passwd = tmp_path / "fleet.passwd"
    for user, password in USERS.items():
        subprocess.run(["mosquitto_passwd", "-b", *(["-c"] if not passwd.exists() else []), str(passwd), user,
                        password], check=True)
    (tmp_path / "fleet.acl").write_text(render_fleet_acl(OWNERS))
    port = free_port()
    conf = shipped_broker_config("fleet.conf", tmp_path, listeners={"listener 8883": f"listener {port} 127.0.0.1"},
                                 files={"/etc/mosquitto/certs/server.pem": certs.cert_file,
                                        "/etc/mosquitto/certs/server.key": certs.key_file,
                                        "/etc/mosquitto/certs/ca.pem": certs.ca_file,
                                        "/etc/mosquitto/fleet.passwd": passwd,
                                        "/etc/mosquitto/fleet.acl": tmp_path / "fleet.acl"})
    proc = subprocess.Popen([binary, "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        await wait_for_listener(proc, port)
        url = f"mqtts://127.0.0.1:{port}"
        tls = {"ca_file": str(certs.ca_file)}
        toy_b = await endpoints(BridgeClient(make_config(url, "toyB", username="toyB", password="b-secret", **tls)))
        await toy_b.publish_state("speaking")
        toy_a = await endpoints(BridgeClient(make_config(url, "toyA", username="toyA", password="a-secret", **tls)))
        await toy_a.publish_state("idle")
        # toy A's own credentials on a firmware client pointed at toy B's topics: nothing of B's arrives
        spy = await endpoints(FirmwareClient(make_config(url, "toyB", username="toyA", password="a-secret", **tls)))
        mine = await endpoints(FirmwareClient(make_config(url, "toyA", username="toyA", password="a-secret", **tls)))
        assert (await asyncio.wait_for(mine.next_state(), 5)).state == "idle"  # its own retained state arrives
        await asyncio.sleep(0.3)  # margin: the spy subscribed first, its retained values would have come before
        assert spy.last_state is None and spy.runtime_online is None
    finally:
        proc.terminate()
        proc.wait(5)
        proc.stderr.close()
