"""The harness end to end: the oracle through a real loopback server, the real openai client and the runtime."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from toy_runtime.agent.prompts import OPEN
from toy_runtime.bench.cli import main as bench_main
from toy_runtime.bench.dataset import DEFAULT_REQUEST_TIME, DEFAULT_TIMEZONE, load_dataset
from toy_runtime.bench.metrics import summarize
from toy_runtime.bench.modes import BenchConfig, run_bench
from toy_runtime.bench.oracle import Oracle, Pacing, start_oracle_server
from toy_runtime.fakes import memory_ports
from toy_runtime.plugins import default_registry
from toy_runtime.testing.scripted_llm import Reply

DATASET = Path(__file__).resolve().parents[2] / "bench" / "datasets" / "toy_turns.jsonl"
NOW = datetime.fromisoformat(DEFAULT_REQUEST_TIME)
# ambiguous + follow-up turns, multi events, terminate with siblings, search; English and Chinese
SUBSET = ["en-04", "en-05", "en-12", "zh-05", "zh-06"]

pytestmark = pytest.mark.timeout(60)


def _oracle(dataset, respond=None):
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE)
    return oracle, start_oracle_server(respond or oracle)


async def _replay(dataset, server, **config):
    cfg = BenchConfig(base_url=server.url, model="scripted-model", concurrency=3, read_timeout_s=5.0,
                      turn_timeout_s=20.0, **config)
    return await run_bench(cfg, dataset)


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_oracle_replay_scores_perfect_event_selection_in_both_modes():
    dataset = load_dataset(DATASET).subset(SUBSET)
    oracle, server = _oracle(dataset)
    try:
        records = await _replay(dataset, server, conditions=("enabled",))
    finally:
        server.close()
    assert oracle.stats.unknown_texts == []
    assert len(records) == 2 * dataset.turn_count
    assert not [r for r in records if r.get("harness_error") or r["metrics"]["fault"]]
    summary = summarize(records, model="scripted-model", registry=default_registry(memory_ports()))
    for mode in ("dual_agent", "chat_agent_tools"):
        accuracy = summary["groups"][f"{mode}/enabled"]["accuracy"]
        assert accuracy["precision"]["value"] == 1.0, mode
        assert accuracy["recall"]["value"] == 1.0, mode
        assert accuracy["multi_event_recall"]["value"] == 1.0 and accuracy["multi_event_recall"]["den"] >= 8
        assert accuracy["status_accuracy"]["value"] == 1.0, mode  # clarifications included
        assert accuracy["visible_leaks"] == 0
        assert accuracy["first_answer_before_search"]["value"] == 1.0
    tools = summary["groups"]["chat_agent_tools/enabled"]
    # the oracle proposes exactly the labelled arguments: every proposal is valid and every event is right
    assert tools["accuracy"]["valid_before_chat_proposals"]["value"] == 1.0
    assert tools["accuracy"]["argument_accuracy"]["value"] == 1.0
    # content_first oracle: visible text always precedes the native tool calls
    assert tools["direct_mode"]["content_after_first_tool_call"]["value"] == 0.0
    assert tools["direct_mode"]["reply_before_first_event"]["value"] == 1.0
    # ordinary turns cost exactly one ChatAgent call in both modes
    for group in summary["groups"].values():
        assert group["calls"]["ordinary_turns_one_call"]["value"] == 1.0


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_disabled_condition_sends_no_tools_and_no_catalog():
    dataset = load_dataset(DATASET).subset(["en-05", "zh-06"])
    oracle, server = _oracle(dataset)
    try:
        records = await _replay(dataset, server, conditions=("disabled",))
        requests = server.requests
    finally:
        server.close()
    assert requests and len(records) == 2 * dataset.turn_count
    for request in requests:
        assert not request.get("tools")
        assert not any(OPEN in str(m.get("content")) for m in request["messages"] if m["role"] == "system")
    assert all(r["expected"] == [] and r["detected"] == [] for r in records)
    assert all(r["metrics"]["llm_calls"] == 1 for r in records)


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_provider_faults_on_tool_requests_are_counted_not_fatal():
    """Like llama.cpp failing on streamed tools: every tools request breaks, the run goes on and says so."""
    dataset = load_dataset(DATASET).subset(["en-06"])
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE)

    def respond(request):
        if request.get("tools") and not isinstance(request.get("tool_choice"), dict):
            return Reply(text="Sure", fault="drop_before_done")
        return oracle(request)

    _, server = _oracle(dataset, respond)
    try:
        records = await _replay(dataset, server, conditions=("enabled",))
    finally:
        server.close()
    summary = summarize(records, model="scripted-model")
    tools = summary["groups"]["chat_agent_tools/enabled"]
    assert tools["runs"]["fault_turns"] == len(dataset.conversations[0].turns)
    assert tools["runs"]["faults"] == {"truncated": tools["runs"]["fault_turns"]}
    assert tools["accuracy"]["recall"]["value"] == 0.0
    assert summary["groups"]["dual_agent/enabled"]["runs"]["fault_turns"] == 0


async def test_suppressed_visible_content_is_reported_as_direct_mode_behaviour():
    """A provider that streams only tool calls (no text) on event turns must show up, not be papered over."""
    dataset = load_dataset(DATASET).subset(["en-02"])
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE, pacing=Pacing(tool_order="tools_only"))
    _, server = _oracle(dataset, oracle)
    try:
        records = await _replay(dataset, server, modes=("chat_agent_tools",), conditions=("enabled",))
    finally:
        server.close()
    direct = summarize(records, model="scripted-model")["groups"]["chat_agent_tools/enabled"]["direct_mode"]
    assert direct["event_turns"] == 3  # en-02: three event turns, one ordinary
    assert direct["no_visible_content"] == {"value": 1.0, "num": 3, "den": 3}
    assert direct["content_after_first_tool_call"]["value"] == 1.0
    # nothing was said before the actions settled: the design's first-answer order failed on every event turn
    assert direct["reply_before_first_event"] == {"value": 0.0, "num": 0, "den": 3}


def test_metric_definitions_count_false_positives_and_misses():
    def record(expected, detected, matched):
        events = [{"name": n, "status": "succeeded", "resolution": "deterministic", "fallback_used": False,
                   "fallback_tokens": 0, "latency_ms": 1.0, "normalized_valid": True, "matched": m,
                   "expected_status": "succeeded" if m else None, "status_ok": m or None, "args_ok": m or None,
                   "correct": m or None, "proposal_valid": None, "fallback_valid": None}
                  for n, m in zip(detected, matched)]
        return {"mode": "dual_agent", "condition": "enabled", "repeat": 0, "conversation": "c", "category": "x",
                "expected": expected, "detected": detected, "events": events,
                "metrics": {"first_answer": {"ttft_ms": 10.0, "prompt_tokens": 5}, "llm_calls": 1, "chat_calls": 1,
                            "prompt_tokens": 5, "completion_tokens": 1, "event_agent": {"calls": 0, "tokens": 0},
                            "events": [], "total_ms": 20.0}}

    records = [record(["a"], ["a", "b"], [True, False]),   # one right, one false positive
               record(["a", "c"], ["a"], [True])]          # a two-event turn with one missed
    accuracy = summarize(records, model="m")["groups"]["dual_agent/enabled"]["accuracy"]
    assert accuracy["precision"] == {"value": round(2 / 3, 4), "num": 2, "den": 3}
    assert accuracy["recall"] == {"value": round(2 / 3, 4), "num": 2, "den": 3}
    assert accuracy["multi_event_recall"] == {"value": 0.5, "num": 1, "den": 2}


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_cli_writes_markdown_json_records_and_a_png(tmp_path, capsys):
    out = tmp_path / "report"
    code = bench_main(["modes", "--scripted", "--zero-delay", "--conversations", "en-06,zh-06",
                       "--concurrency", "2", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert set(summary["groups"]) == {"dual_agent/disabled", "dual_agent/enabled", "chat_agent_tools/disabled",
                                      "chat_agent_tools/enabled"}
    cost = summary["prompt_cost"]
    assert cost["tools_schema_tokens"] > cost["catalog_message_tokens"] > 0
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "| first-answer TTFT |" in markdown and "event-selection recall" in markdown
    assert (out / "ttft_tokens.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = (out / "records.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 * 4  # 2 conversations × 2 turns × 2 modes × 2 conditions
    assert "report:" in capsys.readouterr().out


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_small_model_habits_are_counted_as_hidden_not_leaked():
    """Markdown and a Hermes tool call on every first answer: the guard hides them, the bench says so per kind."""
    dataset = load_dataset(DATASET).subset(["en-06"])
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE)
    call = '<tool_call>{"name": "adjust_device_volume", "arguments": {"mode": "mute"}}</tool_call>'

    def respond(request):
        if request.get("tool_choice") is not None or request["messages"][-1]["role"] != "user":
            return oracle(request)
        return Reply(text="## Okay\n**Sure thing!** " + call, chunk_size=3)

    _, server = _oracle(dataset, respond)
    try:
        records = await _replay(dataset, server, conditions=("enabled",))
    finally:
        server.close()
    summary = summarize(records, model="scripted-model")
    for mode, call_kind in (("dual_agent", "text_tool_call_hidden"), ("chat_agent_tools", "text_tool_call_recovered")):
        group = summary["groups"][f"{mode}/enabled"]
        assert group["accuracy"]["visible_leaks"] == 0
        guard = group["speakable_guard"]
        turns = group["runs"]["completed_turns"]
        assert guard["turns_with_hidden_text"]["num"] >= 1
        assert guard["hidden_by_kind"]["markdown"] >= 3 * guard["hidden_by_kind"][call_kind]
        assert 1 <= guard["hidden_by_kind"][call_kind] <= turns


def test_the_leak_metric_uses_the_guards_detector():
    from toy_runtime.agent.chat_agent import speakable_rules
    from toy_runtime.bench.metrics import speech_leaks

    rules = speakable_rules(default_registry(memory_ports()))
    assert speech_leaks("Okay, all done.", rules) == []
    kinds = speech_leaks('**Okay!** 🎉 {"name": "adjust_device_volume", "arguments": {}} <agent_events>x'
                         "</agent_events> Now device.volume.adjust", rules)
    assert {"markdown", "emoji", "json", "event_block", "name"} <= set(kinds)
    record = {"mode": "dual_agent", "condition": "enabled", "repeat": 0, "conversation": "c", "category": "x",
              "expected": [], "detected": [], "events": [],
              "metrics": {"first_answer": {}, "llm_calls": 1, "chat_calls": 1, "prompt_tokens": 1,
                          "completion_tokens": 1, "event_agent": {"calls": 0, "tokens": 0}, "events": [],
                          "total_ms": 1.0}}
    records = [dict(record, leaks=kinds, visible_leak=True), dict(record, leaks=[], visible_leak=False)]
    accuracy = summarize(records, model="m")["groups"]["dual_agent/enabled"]["accuracy"]
    assert accuracy["visible_leaks"] == 1 and accuracy["leak_kinds"]["json"] == 1
