"""`toy-runtime events resolve` as a user runs it: the child's words (--text) outrank proposed arguments (--args)."""

from __future__ import annotations

import json

import pytest

from .test_cli import run_cli

NOW = ("--now", "2026-11-30T10:00:00+08:00", "--tz", "Asia/Shanghai")  # a Monday, 10:00


@pytest.mark.parametrize("event, text, args, status, expected", [
    ("device.volume.adjust", "set the volume to 30", {"mode": "absolute", "value": 80}, "resolved",
     {"mode": "absolute", "value": 30}),
    ("adjust_device_volume", "把音量调小二十", {"mode": "relative", "delta": 20}, "resolved",
     {"mode": "relative", "delta": -20}),
    ("calendar.schedule.create", "remind me to water the plants at 5 pm tomorrow",
     {"title": "Water plants", "start_at": "2026-12-01T07:00:00+08:00"}, "resolved",
     {"title": "water the plants", "start_at": "2026-12-01T17:00:00+08:00", "timezone": "Asia/Shanghai"}),
    ("calendar.schedule.create", "remind me to water the plants",
     {"title": "water the plants", "start_at": "2026-12-01T07:00:00+08:00"}, "incomplete",
     {"title": "water the plants", "timezone": "Asia/Shanghai"}),
    ("add_schedule", "remind me to feed the cat at 7", {}, "resolved",
     {"title": "feed the cat", "start_at": "2026-11-30T19:00:00+08:00", "timezone": "Asia/Shanghai"}),
])
def test_words_win_over_args(event, text, args, status, expected):
    proc = run_cli("events", "resolve", event, "--text", text, "--args", json.dumps(args), *NOW, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == status and out["arguments"] == expected
    if status == "incomplete":
        assert out["missing"] == ["start_at"] and out["question"] == "What time should I remind you?"
