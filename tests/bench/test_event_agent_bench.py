"""The EventAgent bench (`python -m toy_runtime.bench.event_agent`): the kernel's own request, scored by the
kernel's own resolver, against a real HTTP server on loopback."""

from __future__ import annotations

import json
from datetime import datetime

from toy_runtime.bench.dataset import DEFAULT_REQUEST_TIME, DEFAULT_TIMEZONE, load_dataset
from toy_runtime.bench.event_agent import DEFAULT_DATASET, cases, main
from toy_runtime.fakes import memory_ports
from toy_runtime.plugins import default_registry
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer


def test_the_cases_are_the_labelled_events_with_required_arguments():
    registry = default_registry(memory_ports())
    found = cases(load_dataset(DEFAULT_DATASET), registry, datetime.fromisoformat(DEFAULT_REQUEST_TIME),
                  DEFAULT_TIMEZONE)
    assert found and {c.name for c in found} <= {"device.volume.adjust", "calendar.schedule.create",
                                                 "knowledge.web.search"}
    assert any(c.context.locale == "zh" for c in found) and any(c.context.history for c in found)


def test_right_wrong_and_unanswered_calls_are_counted(tmp_path):
    registry = default_registry(memory_ports())
    [first, second, third] = cases(load_dataset(DEFAULT_DATASET), registry,
                                   datetime.fromisoformat(DEFAULT_REQUEST_TIME), DEFAULT_TIMEZONE)[:3]
    tool = {c.name: registry.lookup(c.name).tool_name for c in (first, second, third)}
    replies = [Reply(tool_calls=[(tool[first.name], json.dumps(first.expected))]),  # the label's own arguments
               Reply(tool_calls=[(tool[second.name], json.dumps({"mode": "sideways"}))]),  # not the schema
               Reply(text="I don't know.")]  # no call at all in any form
    with ScriptedLLMServer(replies, default=Reply(text="I don't know.")) as server:
        assert main(["--base-url", server.url, "--model", "small", "--limit", "3", "--out", str(tmp_path)]) == 0
        assert all(r["model"] == "small" and r["temperature"] == 0 for r in server.requests)
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["right"] for r in records] == [True, False, False]
    assert records[0]["right_after_resolver"] and not records[2]["right_after_resolver"]
    assert records[0]["valid"] and not records[1]["valid"] and records[2]["arguments"] is None
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["all"]["calls"] == 3 and summary["all"]["right"]["num"] == 1
