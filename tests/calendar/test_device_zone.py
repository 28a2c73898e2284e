"""`[session] timezone` defaults to the device's own zone (TZ, else /etc/localtime), not UTC: `config check` and
`doctor` say which, and "remind me at 7 pm" means 7 pm on the family's clock."""

from __future__ import annotations

import json

import pytest

from toy_runtime.config import load_settings
from toy_runtime.system_zone import system_timezone

from ..cli.helpers import clean_env, run_cli


@pytest.mark.parametrize("tz, expected", [
    ("Asia/Shanghai", "Asia/Shanghai"),
    (":Europe/Paris", "Europe/Paris"),  # glibc's "read this file" form
    ("/usr/share/zoneinfo/America/New_York", "America/New_York"),
])
def test_the_default_zone_is_the_devices(tmp_path, tz, expected):
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path), "TZ": tz})
    assert settings.session.timezone == expected


def test_a_configured_zone_still_wins(tmp_path):
    profile = tmp_path / "toy.toml"
    profile.write_text('[session]\ntimezone = "Europe/Berlin"\n')
    settings = load_settings(profile, env={"TOY_STATE_DIR": str(tmp_path), "TZ": "Asia/Shanghai"})
    assert settings.session.timezone == "Europe/Berlin"
    env = {"TOY_STATE_DIR": str(tmp_path), "TZ": "Asia/Shanghai", "TOY_SESSION__TIMEZONE": "Asia/Tokyo"}
    assert load_settings(env=env).session.timezone == "Asia/Tokyo"


@pytest.mark.parametrize("tz", ["CST-8", "Mars/Olympus", "/usr/share/zoneinfo/../../../etc/passwd", ":"])
def test_a_tz_that_names_no_zone_falls_back_to_the_system_files(monkeypatch, tz):
    # a POSIX rule, a made-up name, a path out of the zone database: never a crash, never a made-up zone
    monkeypatch.setenv("TZ", tz)
    zone = system_timezone()
    monkeypatch.delenv("TZ")
    assert zone == system_timezone()


def test_config_check_and_doctor_show_the_zone(tmp_path):
    env = clean_env(tmp_path / "state", TZ="Asia/Shanghai")
    check = run_cli("config", "check", env=env)
    assert check.returncode == 0, check.stderr
    assert "time zone Asia/Shanghai" in check.stdout
    doctor = run_cli("doctor", "--json", *sum((["--skip", c] for c in (
        "state-dir", "audio-input", "audio-output", "ears", "asr", "tts", "alsa-control", "broker", "llm", "search")),
        []),
        env=env)
    config_row = json.loads(doctor.stdout)[0]
    assert config_row["name"] == "config" and "time zone Asia/Shanghai" in config_row["detail"]


def test_seven_pm_is_seven_pm_on_the_family_clock(tmp_path):
    """The same words on two toys: each reads "7 pm" on its own wall clock (no --tz, no setting)."""
    starts = {}
    for tz in ("Asia/Shanghai", "America/New_York"):
        proc = run_cli("events", "resolve", "calendar.schedule.create", "--json",
                       "--text", "remind me to feed the cat at 7 pm", "--now", "2026-12-01T10:00:00",
                       env=clean_env(tmp_path / tz.replace("/", "_"), TZ=tz))
        assert proc.returncode == 0, proc.stderr
        payload = json.loads(proc.stdout)
        assert payload["status"] == "resolved", payload
        starts[tz] = (payload["arguments"]["start_at"], payload["arguments"]["timezone"])
    assert starts == {"Asia/Shanghai": ("2026-12-01T19:00:00+08:00", "Asia/Shanghai"),
                      "America/New_York": ("2026-12-01T19:00:00-05:00", "America/New_York")}
