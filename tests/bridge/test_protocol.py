"""The wire protocol: topics, versioned payloads, clear errors, URL parsing, import boundaries."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from firmware_bridge import protocol as p
from firmware_bridge.config import BridgeConfig, parse_mqtt_url


def test_topic_layout() -> None:
    t = p.Topics("toy1")
    assert [t.button, t.firmware_status, t.state, t.volume, t.online, t.command, t.command_result] == [
        "toy/toy1/button", "toy/toy1/firmware/status", "toy/toy1/state", "toy/toy1/volume", "toy/toy1/online",
        "toy/toy1/command", "toy/toy1/command/result",
    ]
    assert t.suffix_of("toy/toy1/firmware/status") == "firmware/status"
    with pytest.raises(p.ProtocolError) as err:
        t.suffix_of("toy/toy2/button")
    assert err.value.code == "unknown_topic"


@pytest.mark.parametrize("bad", ["", "a/b", "a+", "#", "x" * 65, "-lead"])
def test_device_id_must_be_one_safe_topic_level(bad: str) -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.Topics(bad)
    assert err.value.code == "invalid_device_id"


def test_every_payload_round_trips_with_version() -> None:
    samples = [
        p.ButtonEvent(action="long_press", seq=3),
        p.FirmwareStatus(battery_pct=42, charging=True, firmware_version="1.2.3"),
        p.StateMessage(state="thinking", session_id="s1"),
        p.VolumeMessage(level=30, muted=False, event_id="ev1"),
        p.Command(command_id="c1", name="device.volume.adjust", arguments={"mode": "absolute", "value": 30},
                  actor="app"),
        p.CommandResult(command_id="c1", status="refused", error=p.CommandErrorInfo(code="capability_not_granted")),
    ]
    for sample in samples:
        raw = p.encode(sample)
        assert json.loads(raw)["v"] == 1
        assert p.parse(type(sample), raw) == sample


def test_unknown_fields_are_ignored_within_v1() -> None:
    button = p.parse_button(b'{"v":1,"action":"press","future_field":7}')
    assert button.action == "press"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"\xff\xfe", "invalid_json"),
        (b"[1,2]", "invalid_payload"),
        (b'{"action":"press"}', "unsupported_version"),
        (b'{"v":2,"action":"press"}', "unsupported_version"),
        (b'{"v":1,"action":"double_click"}', "invalid_payload"),
        (b'{"v":1}', "invalid_payload"),
    ],
)
def test_bad_button_payloads_raise_clear_errors(raw: bytes, code: str) -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.parse_button(raw)
    assert err.value.code == code
    assert err.value.message


def test_bad_command_keeps_its_id_so_it_can_be_answered() -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.parse_command(b'{"v":1,"command_id":"c9","name":"x","actor":"stranger"}')
    assert err.value.code == "invalid_payload"
    assert err.value.command_id == "c9"
    assert "actor" in err.value.message


def test_overlong_command_id_is_answered_with_its_first_128_characters() -> None:
    """The `invalid` answer must itself be a valid result (a 300-character id once made it fail with a traceback)."""
    with pytest.raises(p.ProtocolError) as err:
        p.parse_command(json.dumps({"v": 1, "command_id": "c" * 300, "name": "x", "actor": "app"}).encode())
    assert err.value.code == "invalid_payload" and "command_id" in err.value.message
    assert err.value.command_id == "c" * p.MAX_ID_CHARS
    answer = p.command_error(err.value.command_id, err.value.code, err.value.message, status="invalid")
    assert p.parse_command_result(p.encode(answer)).command_id == "c" * 128


@pytest.mark.parametrize(
    "raw",
    [
        b'{"v":1,"action":"press","ts":NaN}',
        b'{"v":1,"action":"press","ts":-Infinity}',
        b'{"v":1,"action":"press","ts":1e400}',  # decodes to inf
        b'{"v":1,"action":"press","button":"\\ud800"}',  # a lone surrogate cannot be encoded again
        b'{"v":1,"action":"press","\\udc00":1}',
    ],
)
def test_non_finite_numbers_and_lone_surrogates_are_rejected(raw: bytes) -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.parse_button(raw)
    assert err.value.code in ("invalid_json", "invalid_payload")


def test_a_command_id_that_cannot_be_encoded_is_not_answered() -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.parse_command(b'{"v":1,"command_id":"\\ud800","name":"x","actor":"app"}')
    assert err.value.command_id is None


def test_payload_over_the_limit_is_rejected_before_decoding() -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.parse_button(b'{"v":1,"action":"press","pad":"' + b"x" * p.MAX_PAYLOAD_BYTES + b'"}')
    assert err.value.code == "payload_too_large"


def test_error_messages_stay_short_whatever_the_payload() -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.parse_command(json.dumps({"v": "x" * 50_000, "command_id": "c1"}).encode())
    assert err.value.code == "unsupported_version"
    assert len(err.value.message) <= p.MAX_MESSAGE_CHARS and len(str(err.value)) < 400


def test_volume_and_battery_ranges_are_enforced() -> None:
    with pytest.raises(p.ProtocolError):
        p.parse_volume(b'{"v":1,"level":101,"muted":false}')
    with pytest.raises(p.ProtocolError):
        p.parse_firmware_status(b'{"v":1,"battery_pct":-1}')


def test_presence_is_a_plain_string() -> None:
    assert p.parse_online(b"online") is True
    assert p.parse_online("offline") is False
    with pytest.raises(p.ProtocolError):
        p.parse_online(b'{"v":1}')


def test_parse_for_topic_dispatches_by_suffix() -> None:
    t = p.Topics("toy1")
    suffix, payload = p.parse_for_topic(t, "toy/toy1/state", b'{"v":1,"state":"idle"}')
    assert suffix == "state" and isinstance(payload, p.StateMessage)
    with pytest.raises(p.ProtocolError):
        p.parse_for_topic(t, "toy/toy1/unknown", b"{}")


@pytest.mark.parametrize(
    ("url", "host", "port", "tls"),
    [
        ("mqtt://127.0.0.1:1883", "127.0.0.1", 1883, False),
        ("mqtt://broker.local", "broker.local", 1883, False),
        ("mqtts://broker.example.com", "broker.example.com", 8883, True),
        ("mqtts://10.0.0.2:9883", "10.0.0.2", 9883, True),
    ],
)
def test_parse_mqtt_url(url: str, host: str, port: int, tls: bool) -> None:
    parsed = parse_mqtt_url(url)
    assert (parsed.host, parsed.port, parsed.tls) == (host, port, tls)


@pytest.mark.parametrize("url", ["http://x:1883", "mqtt://", "mqtt://h:notaport", "mqtt://h:1883/path", "h:1883"])
def test_parse_mqtt_url_rejects(url: str) -> None:
    with pytest.raises(ValueError):
        parse_mqtt_url(url)


def test_config_password_is_secret_and_overrides_url() -> None:
    cfg = BridgeConfig(url="mqtts://u:urlpw@h", device_id="toy1", password="envpw")
    assert "envpw" not in repr(cfg)
    broker = cfg.broker()
    assert (broker.username, broker.password, broker.tls) == ("u", "envpw", True)


def test_firmware_bridge_imports_nothing_from_toy_runtime_and_paho_lazily() -> None:
    code = (
        "import sys, firmware_bridge, firmware_bridge.protocol, firmware_bridge.config;"
        "assert 'paho' not in sys.modules, 'paho imported eagerly';"
        "import firmware_bridge.client, firmware_bridge.firmware, firmware_bridge.simulator;"
        "bad = [m for m in sys.modules if m.startswith('toy_runtime')];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_command_expiry_is_optional_and_the_earlier_deadline_wins() -> None:
    from firmware_bridge.client import with_message_expiry

    old = p.parse_command(b'{"v": 1, "command_id": "c1", "name": "session.end", "actor": "app"}')
    assert old.expires_at is None and not old.expired(now=1e12)  # a v1 sender that never heard of expiry
    timed = p.parse_command(b'{"v": 1, "command_id": "c1", "name": "session.end", "actor": "app",'
                            b' "expires_at": 1000.5}')
    assert not timed.expired(now=1000.5) and timed.expired(now=1000.6)
    assert json.loads(p.encode(timed))["expires_at"] == 1000.5
    with pytest.raises(p.ProtocolError):
        p.parse_command(b'{"v": 1, "command_id": "c1", "name": "x", "actor": "app", "expires_at": "soon"}')
    # MQTT 5 message expiry: what is left of the interval when it arrived, counted from then
    assert with_message_expiry(old, 30, now=1000.0).expires_at == 1030.0
    assert with_message_expiry(timed, 30, now=1000.0).expires_at == 1000.5  # the payload's is earlier
    assert with_message_expiry(timed, 0, now=900.0).expires_at == 900.0  # the broker's is earlier
    assert with_message_expiry(old, None) is old  # MQTT 3.1.1, or no expiry set
