"""The shipped profiles load and say what the toy and the laptop need."""

from __future__ import annotations

from pathlib import Path

from toy_runtime.config import load_settings

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_toy_profile():
    s = load_settings(CONFIGS / "toy.toml", env={})
    assert s.session.trigger == "vad"
    assert (s.volume.backend, s.volume.device, s.volume.control) == ("alsa", "default", "PCM")
    assert s.mqtt.url == "mqtt://127.0.0.1:1883" and s.mqtt.username == s.mqtt.device_id
    assert s.state_dir == Path("/var/lib/toy-runtime")  # systemd's StateDirectory=toy-runtime
    assert s.audit_path.is_relative_to(s.state_dir) and s.calendar_path.is_relative_to(s.state_dir)
    assert s.asr.model_path.is_relative_to(s.state_dir / "models")
    assert s.tts.voice_path.is_relative_to(s.state_dir / "models")


def test_toy_profile_model_paths_match_the_manifest():
    manifest = (Path(__file__).resolve().parents[2] / "scripts" / "models.manifest").read_text()
    dests = [line.split()[0] for line in manifest.splitlines() if line.strip() and not line.startswith("#")]
    s = load_settings(CONFIGS / "toy.toml", env={})
    models = s.state_dir / "models"
    installed = {models / (d[:-4] if d.endswith(".zip") else d) for d in dests}
    assert {s.asr.model_path, s.tts.voice_path, s.tts.config_path} <= installed


def test_laptop_profile():
    s = load_settings(CONFIGS / "laptop.toml", env={})
    assert s.session.trigger == "button"
    assert s.volume.backend == "memory"
    assert s.mqtt.url is None


def test_environment_still_overrides_the_toy_profile():
    s = load_settings(CONFIGS / "toy.toml", env={"TOY_VOLUME__CONTROL": "Speaker", "TOY_MQTT__PASSWORD": "pw"})
    assert s.volume.control == "Speaker"
    assert s.mqtt.password.get_secret_value() == "pw"
