"""The labelled dataset: coverage, validation errors, and how labels are checked against a pinned clock."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from toy_runtime.bench.dataset import (
    CATEGORIES,
    DEFAULT_REQUEST_TIME,
    EVENT_NAMES,
    DatasetError,
    ExpectedEvent,
    arguments_match,
    concrete_arguments,
    load_dataset,
    query_matches,
)

DATASET = Path(__file__).resolve().parents[2] / "bench" / "datasets" / "toy_turns.jsonl"
NOW = datetime.fromisoformat(DEFAULT_REQUEST_TIME)  # Wednesday 2026-03-04 09:30 +08:00


def test_repo_dataset_covers_every_category_language_and_event():
    dataset = load_dataset(DATASET)
    stats = dataset.stats()
    assert stats["turns"] >= 100
    assert set(stats["categories"]) == set(CATEGORIES)
    assert stats["languages"]["en"] >= 40 and stats["languages"]["zh"] >= 40
    assert set(stats["events"]) == set(EVENT_NAMES)
    assert all(len(c.turns) >= 2 for c in dataset.conversations)  # multi-turn conversations


def _write(tmp_path, *conversations) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in conversations) + "\n", encoding="utf-8")
    return path


def _conv(cid, *turns):
    return {"id": cid, "lang": "en", "turns": list(turns)}


def test_category_must_fit_the_labels(tmp_path):
    bad = _conv("a", {"user": "hi", "category": "ordinary",
                      "expected_events": [{"name": "session.terminate"}]})
    with pytest.raises(DatasetError, match=r"d\.jsonl:1: .*ordinary turn expects no events"):
        load_dataset(_write(tmp_path, bad))


def test_terminate_must_be_the_last_turn(tmp_path):
    bye = {"user": "bye", "category": "single_event", "expected_events": [{"name": "session.terminate"}]}
    hello = {"user": "hello", "category": "ordinary"}
    with pytest.raises(DatasetError, match="ends the session but is not the last turn"):
        load_dataset(_write(tmp_path, _conv("a", bye, hello)))


def test_same_text_with_different_labels_is_refused(tmp_path):
    one = _conv("a", {"user": "louder", "category": "single_event",
                      "expected_events": [{"name": "device.volume.adjust",
                                           "arguments": {"mode": "relative", "delta": 10}}]})
    two = _conv("b", {"user": "louder", "category": "single_event",
                      "expected_events": [{"name": "device.volume.adjust",
                                           "arguments": {"mode": "relative", "delta": 20}}]})
    with pytest.raises(DatasetError, match="labelled differently"):
        load_dataset(_write(tmp_path, one, two))


def test_volume_labels_must_be_normalized():
    with pytest.raises(ValueError, match="not normalized"):
        ExpectedEvent(name="device.volume.adjust", arguments={"mode": "absolute", "delta": 5})


def test_schedule_labels_become_absolute_times_in_the_session_zone():
    in_ten = ExpectedEvent(name="calendar.schedule.create", arguments={"title": "feed the fish",
                                                                       "start_in_minutes": 10})
    tomorrow = ExpectedEvent(name="calendar.schedule.create",
                             arguments={"title": "brush", "start_local": "07:00", "day_offset": 1,
                                        "recurrence": {"frequency": "daily"}})
    assert concrete_arguments(in_ten, NOW, "Asia/Shanghai") == {
        "title": "feed the fish", "start_at": "2026-03-04T09:40:00+08:00", "timezone": "Asia/Shanghai"}
    assert concrete_arguments(tomorrow, NOW, "Europe/Berlin")["start_at"] == "2026-03-05T07:00:00+01:00"
    vague = ExpectedEvent(name="calendar.schedule.create", arguments={"title": "water"},
                          status="needs_clarification")
    assert concrete_arguments(vague, NOW, "Asia/Shanghai") == {"title": "water"}


def test_argument_matching_rules():
    assert query_matches("weather Paris today", "what's the weather in Paris today?")
    assert not query_matches("weather Paris today", "weather in London today")
    assert query_matches("北京 天气", "今天北京的天气")
    assert not query_matches("上海 下雨", "北京天气")
    expected = {"title": "call grandma", "start_at": "2026-03-04T18:00:00+08:00", "timezone": "Asia/Shanghai"}
    same_instant = {**expected, "title": "Call Grandma.", "start_at": "2026-03-04T10:00:00+00:00"}
    assert arguments_match("calendar.schedule.create", expected, same_instant)
    wrong_title = {**expected, "title": "Turn the volume down and call grandma"}
    assert not arguments_match("calendar.schedule.create", expected, wrong_title)
    assert not arguments_match("device.volume.adjust", {"mode": "relative", "delta": -10},
                               {"mode": "absolute", "value": 6})


def test_bench_pipeline_gathers_script_output(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "toy_runtime", "bench", "pipeline", "--only", "parser", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = (tmp_path / "pipeline.md").read_text()
    assert "## parser" in report and "MB/s" in report
