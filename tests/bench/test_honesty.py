"""Bench honesty on local servers (issue 17): cold vs warm first calls, server-counted prompt tokens, local price,
the runtime's own timeouts. Real loopback HTTP (the dataset oracle behind the scripted server)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from toy_runtime.bench.cli import is_loopback
from toy_runtime.bench.cli import main as bench_main
from toy_runtime.bench.dataset import DEFAULT_REQUEST_TIME, DEFAULT_TIMEZONE, load_dataset
from toy_runtime.bench.metrics import summarize
from toy_runtime.bench.modes import BenchConfig, run_bench, settings_for
from toy_runtime.bench.oracle import Oracle
from toy_runtime.config import LLMConfig
from toy_runtime.testing.scripted_llm import ScriptedLLMServer, estimate_prompt_tokens

from .test_replay import DATASET

NOW = datetime.fromisoformat(DEFAULT_REQUEST_TIME)
pytestmark = pytest.mark.timeout(60)


async def _run(dataset, server, **config):
    cfg = BenchConfig(base_url=server.url, model="scripted-model", concurrency=2, turn_timeout_s=20.0,
                      conditions=("enabled",), **config)
    return await run_bench(cfg, dataset)


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_each_conversation_starts_cold_with_its_own_prefix_and_later_turns_are_warm():
    dataset = load_dataset(DATASET).subset(["en-05", "zh-06"])
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE)
    with ScriptedLLMServer(oracle) as server:
        records = await _run(dataset, server, modes=("dual_agent",))
        requests = server.requests
    firsts = {r["messages"][0]["content"].split("\n", 1)[0] for r in requests
              if r.get("stream") and r["messages"][0]["role"] == "system"}
    # one unique first line per conversation, the same line on every call of that conversation
    assert len(firsts) == len(dataset.conversations) and all(line.startswith("Session ") for line in firsts)
    assert [r["cold"] for r in records if r["conversation"] == "en-05"] == [True] + [False] * (
        len(dataset.conversations[0].turns) - 1)
    latency = summarize(records, model="scripted-model")["groups"]["dual_agent/enabled"]["latency_ms"]
    assert latency["first_answer_ttft_cold"]["n"] == 2
    assert latency["first_answer_ttft_warm"]["n"] == dataset.turn_count - 2


async def test_warm_only_sends_the_plain_persona_and_reports_no_cold_figure():
    dataset = load_dataset(DATASET).subset(["en-05"])
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE)
    with ScriptedLLMServer(oracle) as server:
        records = await _run(dataset, server, modes=("dual_agent",), cold_prefix=False)
        requests = server.requests
    assert not any(r["messages"][0]["content"].startswith("Session ") for r in requests)
    assert all(r["cold"] is None for r in records)


async def test_without_streamed_usage_the_server_counts_the_replayed_first_call():
    """llama-cpp-python streams no usage: the first call is replayed (max_tokens 1, not streamed) and the server's
    count of that exact request (tools included) is reported, with the estimate kept beside it."""
    dataset = load_dataset(DATASET).subset(["en-05"])
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE)
    with ScriptedLLMServer(oracle, reject_fields=("stream_options",)) as server:
        records = await _run(dataset, server, modes=("chat_agent_tools",))
        requests = server.requests
    replays = [r for r in requests if not r.get("stream") and r.get("max_tokens") == 1]
    assert len(replays) == len(records)
    streamed_firsts = [r for r in requests if r.get("stream") and r.get("tools") and "stream_options" not in r
                       and r.get("tool_choice") != "none"]
    for record, replay in zip(records, replays):
        assert record["first_call_prompt_source"] == "server_replay"
        assert record["first_call_prompt_tokens"] == estimate_prompt_tokens(replay)  # the scripted server's count
        assert record["first_call_prompt_estimate"] > 0
        assert replay["tools"] and any(replay["messages"] == s["messages"] for s in streamed_firsts)
    tokens = summarize(records, model="scripted-model")["groups"]["chat_agent_tools/enabled"]["tokens"]
    assert tokens["first_call_prompt_source"] == {"server_replay": len(records)}
    assert tokens["first_call_prompt_estimated"]["n"] == 0


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_usage_in_the_stream_needs_no_replay_and_no_count_falls_back_to_a_labelled_estimate():
    dataset = load_dataset(DATASET).subset(["en-05"])
    oracle = Oracle(dataset, request_time=NOW, timezone=DEFAULT_TIMEZONE)
    with ScriptedLLMServer(oracle) as server:
        counted = await _run(dataset, server, modes=("dual_agent",))
        assert not [r for r in server.requests if not r.get("stream")]
    with ScriptedLLMServer(oracle, reject_fields=("stream_options",)) as server:
        estimated = await _run(dataset, server, modes=("dual_agent",), count_prompt_tokens=False)
    assert {r["first_call_prompt_source"] for r in counted} == {"provider"}
    assert {r["first_call_prompt_source"] for r in estimated} == {"estimate"}
    tokens = summarize(estimated, model="scripted-model")["groups"]["dual_agent/enabled"]["tokens"]
    assert tokens["first_call_prompt_counted"]["n"] == 0 and tokens["first_call_prompt_estimated"]["n"] > 0


def test_the_bench_keeps_the_runtimes_timeouts_unless_told_otherwise(tmp_path):
    defaults = LLMConfig()
    settings = settings_for(BenchConfig(base_url="http://127.0.0.1:1/v1", model="m"), "dual_agent", "enabled",
                            str(tmp_path))
    assert settings.llm.first_token_timeout_s == defaults.first_token_timeout_s
    assert settings.llm.read_timeout_s == defaults.read_timeout_s
    overridden = settings_for(BenchConfig(base_url="http://127.0.0.1:1/v1", model="m", read_timeout_s=60,
                                          first_token_timeout_s=90), "dual_agent", "enabled", str(tmp_path))
    assert (overridden.llm.first_token_timeout_s, overridden.llm.read_timeout_s) == (90, 60)


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_local_models_cost_zero_and_a_flat_price_replaces_the_table(tmp_path):
    assert is_loopback("http://127.0.0.1:8099/v1") and is_loopback("http://localhost:8080/v1")
    assert is_loopback("http://[::1]:8080/v1") and not is_loopback("https://api.openai.com/v1")
    out = tmp_path / "report"
    assert bench_main(["modes", "--scripted", "--zero-delay", "--conversations", "en-06", "--out", str(out),
                       "--conditions", "enabled"]) == 0
    summary = json.loads((out / "report.json").read_text(encoding="utf-8"))
    for group in summary["groups"].values():
        assert group["cost_usd"]["total"] == 0.0  # not null: a local model's tokens cost nothing
    assert any("0 USD per 1M" in note for note in summary["notes"])
    assert summary["meta"]["first_token_timeout_s"] == LLMConfig().first_token_timeout_s
    record = {"mode": "dual_agent", "condition": "enabled", "repeat": 0, "conversation": "c", "category": "x",
              "expected": [], "detected": [], "events": [],
              "metrics": {"first_answer": {"ttft_ms": 1.0}, "llm_calls": 1, "chat_calls": 1, "prompt_tokens": 900_000,
                          "completion_tokens": 100_000, "event_agent": {"calls": 0, "tokens": 0}, "events": []}}
    priced = summarize([record], model="m", price_per_mtok=2.0)["groups"]["dual_agent/enabled"]
    assert priced["cost_usd"]["total"] == 2.0  # 1M tokens at 2 USD per 1M
