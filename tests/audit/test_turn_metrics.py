"""The `turn.completed` record is a contract (`toy-runtime report`, the benches, the console read it): `TurnMetrics`
writes the same fields, in the same order, with the same values as the dict it replaced."""

from __future__ import annotations

from toy_runtime.events import (BatchOutcome, Continuation, EventResult, EventStatus, EventTimings, ResolutionPath,
                                ResultPolicy)
from toy_runtime.metrics.turn_metrics import TurnMetrics
from toy_runtime.ports.llm import CallStats

FIELDS = ["mode", "path", "fault", "llm_calls", "chat_calls", "first_answer", "second_answer", "first_speech_ms",
          "holding_cue_ms", "second_speech_ms", "prompt_tokens", "completion_tokens", "event_agent", "events",
          "dropped_events", "deterministic_hits", "deterministic_hit_rate", "dispatch_delay_ms_max", "total_ms"]


def _call(purpose: str, prompt: int, completion: int, fault: str | None = None) -> CallStats:
    return CallStats(purpose, started=10.0, first_content_at=10.25, finished_at=10.5, prompt_tokens=prompt,
                     completion_tokens=completion, fault=fault)


def _result(name: str, resolution: ResolutionPath | None, fallback: bool) -> EventResult:
    return EventResult(event_id=f"ev_{name}", name=name, status=EventStatus.SUCCEEDED,
                       policy=ResultPolicy.SILENT_SUCCESS, arguments={}, resolution=resolution,
                       fallback_used=fallback, timings=EventTimings(total_ms=12.34567))


def test_the_record_keeps_its_fields_order_and_values():
    outcome = BatchOutcome(results=(_result("a", ResolutionPath.DETERMINISTIC, False), _result("b", None, False),
                                    _result("c", ResolutionPath.LLM_FALLBACK, True)),
                           continuation=Continuation(), dropped=("nope",), elapsed_ms=5.0,
                           dispatch_delays_ms=(0.5, 1.5, 0.25))
    metrics = TurnMetrics.measure(
        mode="dual_agent", path="llm", fault=None, started=10.0, now=11.0,
        first=_call("chat_agent", 100, 20), second=_call("follow_up", 50, 5, fault="connect"),
        agent_calls=[_call("event_agent", 30, 3)], outcome=outcome,
        first_speech_at=10.3, holding_at=None, second_speech_at=10.8)
    record = metrics.as_dict()
    assert list(record) == FIELDS
    assert record["llm_calls"] == 2 and record["chat_calls"] == 1  # a refused connection is no call
    assert (record["prompt_tokens"], record["completion_tokens"]) == (100, 20)
    assert record["event_agent"] == {"calls": 1, "tokens": 33}
    assert record["first_speech_ms"] == 300.0 and record["holding_cue_ms"] is None
    assert record["second_speech_ms"] == 800.0 and record["total_ms"] == 1000.0
    assert record["first_answer"] == _call("chat_agent", 100, 20).as_dict()
    assert record["events"][0] == {"name": "a", "status": "succeeded", "resolution": "deterministic",
                                   "fallback_used": False, "dispatch_delay_ms": 0.5, "latency_ms": 12.346}
    assert record["dropped_events"] == ["nope"]
    assert (record["deterministic_hits"], record["deterministic_hit_rate"]) == (1, 0.5)
    assert record["dispatch_delay_ms_max"] == 1.5
    assert type(record["path"]) is str  # plain JSON values, never an enum's repr
