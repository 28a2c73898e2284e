"""The mode-comparison harness: replay the dataset per mode × condition and record per-turn metrics + correctness.

Every conversation runs on a fresh runtime (in-memory mixer, calendar, search and audit; a ManualClock pinned to
the request time), so conversations are independent and can run concurrently under one `asyncio.Semaphore`.
All (repeat, mode, condition, conversation) jobs are shuffled with a fixed seed, so slow drift of the endpoint
(warm-up, rate limits, a busy box) spreads over both modes instead of biasing one of them. Both modes use the
same settings tree apart from `agent.tool_invocation_mode`: same model, persona, sampling and output budget.

A turn that breaks (a provider fault) is recorded as it happened; a harness-level failure (timeout, exception)
is recorded as `harness_error` and the run goes on. The runtime's own `[llm]` timeouts apply unless the config
overrides them, so a first token the child would wait too long for shows up as a fault here too.

Honest numbers on a local server (issue 17): each conversation's system prompt starts with a unique session line,
so its first call has no cached prefix (`cold`) and later turns reuse the server's cache (`warm`); and when the
server sends no usage, each turn's first ChatAgent request is replayed once after the turn, non-streamed with
`max_tokens` 1, so the server counts the real rendered prompt (template and tool schemas included) without the
replay touching the measured latencies. The estimate is kept only where neither count is available.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
import uuid
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

from ..agent.chat_agent import speakable_rules
from ..agent.llm import CallStats, LLMFault, ToolCallDeltas
from ..app.runtime import build_runtime
from ..config import Settings, load_settings, with_updates
from ..audit import MemoryAudit
from ..events import EventResult, IdempotencyStore, schema_errors
from ..fakes.calendar import MemoryCalendarStore
from ..fakes.clock import ManualClock
from ..fakes.device import MemoryMixer
from ..fakes.search import StaticSearch
from ..host.envelope import message_event
from ..session.items import EventOutcome, Speech, TurnEnd
from .dataset import (
    DEFAULT_REQUEST_TIME,
    DEFAULT_TIMEZONE,
    SEARCH,
    Conversation,
    Dataset,
    ExpectedEvent,
    arguments_match,
    concrete_arguments,
)
from .metrics import guard_hidden, speech_leaks
from .truth import turn_truth

MODES = ("dual_agent", "chat_agent_tools")
CONDITIONS: dict[str, tuple[str, ...] | None] = {"disabled": (), "enabled": None}  # events.enabled per condition


@dataclass(frozen=True)
class BenchConfig:
    """One bench run. Sampling fields left None keep the runtime defaults (identical for both modes)."""

    base_url: str
    model: str
    event_model: str | None = None
    api_key: str | None = None
    modes: tuple[str, ...] = MODES
    conditions: tuple[str, ...] = tuple(CONDITIONS)
    repeat: int = 1
    concurrency: int = 2
    request_time: datetime = field(default_factory=lambda: datetime.fromisoformat(DEFAULT_REQUEST_TIME))
    timezone: str = DEFAULT_TIMEZONE
    seed: int = 0
    turn_timeout_s: float = 90.0
    read_timeout_s: float | None = None  # None: the runtime's [llm] defaults, the ones a child would live with
    first_token_timeout_s: float | None = None
    llm_profile: str | None = None  # [llm] profile; None: hosted, the runtime's default
    connect_timeout_s: float | None = None
    cold_prefix: bool = True  # a unique first line per conversation: its first call cannot hit a cached prefix
    count_prompt_tokens: bool = True  # replay a turn's first call (max_tokens 1) when the stream carried no usage
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    tools_reply_first: bool = False  # chat_agent_tools: the instruction asks for the reply before the calls

    def __post_init__(self) -> None:
        unknown = set(self.modes) - set(MODES) or set(self.conditions) - set(CONDITIONS)
        if unknown:
            raise ValueError(f"unknown mode/condition: {', '.join(sorted(unknown))}")
        if self.repeat < 1 or self.concurrency < 1:
            raise ValueError("repeat and concurrency must be at least 1")


class ToolCallTiming:
    """Wraps the runtime's ChatClient to note when each ChatAgent call yields its first tool-call delta.

    The runtime's call stats time the first visible content but not the first tool call; this observes the same
    stream the ChatAgent consumes (nothing is changed or reordered) so the bench can tell whether native tool
    calls came before the visible reply. Drop it once CallStats records the first tool-call delta itself.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []  # one per stream() call: purpose, first_tool_call_ms, request, stats

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, stats: CallStats, **request: Any):
        entry: dict[str, Any] = {"purpose": stats.purpose, "first_tool_call_ms": None, "stats": stats,
                                 "request": {**request, "messages": list(request.get("messages") or ())}}
        self.calls.append(entry)
        async for item in self.inner.stream(stats, **request):
            if isinstance(item, ToolCallDeltas) and entry["first_tool_call_ms"] is None:
                entry["first_tool_call_ms"] = round((time.perf_counter() - stats.started) * 1000, 3)
            yield item


def settings_for(config: BenchConfig, mode: str, condition: str, state_dir: str) -> Settings:
    """The settings tree of one mode × condition: everything else is identical between the runs."""
    env = {"TOY_STATE_DIR": state_dir}
    if config.api_key:
        env["OPENAI_API_KEY"] = config.api_key  # secrets come only from the environment
    if config.llm_profile:
        env["TOY_LLM__PROFILE"] = config.llm_profile
    settings = load_settings(env=env)
    llm = {"base_url": config.base_url, "model": config.model, "event_model": config.event_model,
           "read_timeout_s": config.read_timeout_s, "first_token_timeout_s": config.first_token_timeout_s,
           "connect_timeout_s": config.connect_timeout_s,
           "temperature": config.temperature, "top_p": config.top_p, "max_tokens": config.max_tokens}
    enabled = CONDITIONS[condition]
    return with_updates(settings, llm=llm,
                        # the harness's own turn timeout bounds a bench turn, not the runtime's turn deadline
                        agent={"tool_invocation_mode": mode, "turn_deadline_s": config.turn_timeout_s,
                               "tools_reply_first": config.tools_reply_first},
                        events={"enabled": list(enabled) if enabled is not None else None},
                        session={"timezone": config.timezone}, audit={"enabled": False})


async def run_bench(config: BenchConfig, dataset: Dataset, *,
                    progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Replay `dataset` for every repeat × mode × condition; returns one record per user turn."""
    jobs = [(rep, mode, condition, conversation)
            for rep in range(config.repeat) for mode in config.modes for condition in config.conditions
            for conversation in dataset.conversations]
    random.Random(config.seed).shuffle(jobs)
    semaphore = asyncio.Semaphore(config.concurrency)
    done = 0
    with tempfile.TemporaryDirectory(prefix="toy-bench-") as state_dir:
        settings = {(m, c): settings_for(config, m, c, state_dir) for m in config.modes for c in config.conditions}

        async def job(rep: int, mode: str, condition: str, conversation: Conversation) -> list[dict[str, Any]]:
            nonlocal done
            async with semaphore:
                records = await run_conversation(settings[(mode, condition)], config, conversation,
                                                 repeat=rep, condition=condition)
            done += 1
            if progress is not None:
                progress(done, len(jobs))
            return records

        tasks = [asyncio.create_task(job(*j), name=f"bench:{j[0]}:{j[1]}:{j[2]}:{j[3].id}") for j in jobs]
        try:
            results = await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    records = [record for chunk in results for record in chunk]
    records.sort(key=lambda r: (r["repeat"], r["mode"], r["condition"], r["conversation"], r["turn_index"]))
    return records


async def run_conversation(settings: Settings, config: BenchConfig, conversation: Conversation, *,
                           repeat: int = 0, condition: str = "enabled") -> list[dict[str, Any]]:
    """Run one conversation on a fresh runtime; one record per turn."""
    if config.cold_prefix:  # see the module doc: the same few tokens in both modes, a new prefix per conversation
        persona = f"Session {uuid.uuid4().hex[:12]}.\n{settings.agent.persona}"
        settings = with_updates(settings, agent={"persona": persona})
    clock = ManualClock(config.request_time)
    audit = MemoryAudit()
    runtime = build_runtime(settings, mixer=MemoryMixer(), search=StaticSearch(clock=clock),
                            calendar=MemoryCalendarStore(clock), clock=clock, audit=audit,
                            idempotency=IdempotencyStore())  # in memory like the other ports: nothing on disk
    enabled = set(runtime.registry.names)
    timing = None
    if runtime.chat_agent is not None:
        timing = runtime.chat_agent.client = ToolCallTiming(runtime.chat_agent.client)
    records = []
    try:
        await runtime.warm()  # importing the LLM SDK is start-up, not the first turn's latency
        runner = runtime.new_turn_runner()
        for index, turn in enumerate(conversation.turns):
            base = {"repeat": repeat, "mode": settings.agent.tool_invocation_mode, "condition": condition,
                    "conversation": conversation.id, "lang": conversation.lang, "turn_index": index,
                    "category": turn.category, "user": turn.user}
            expected = [e for e in turn.expected_events if e.name in enabled]
            agent_calls_before = runtime.event_agent.total if runtime.event_agent else 0
            timing_before = len(timing.calls) if timing else 0
            started = time.perf_counter()
            try:
                items = await asyncio.wait_for(_collect(runner, turn.user), timeout=config.turn_timeout_s)
                record = evaluate_turn(items, expected, runtime=runtime, audit=audit, config=config,
                                       started=started, agent_calls_before=agent_calls_before)
                record.update(turn_truth(turn.user, [i for i in items if isinstance(i, Speech)],
                                         [i.result for i in items if isinstance(i, EventOutcome)],
                                         [e.name for e in turn.expected_events], runtime.registry))
                first_call = next((c for c in (timing.calls[timing_before:] if timing else [])
                                   if c["purpose"] == "chat_agent"), None)
                if record["first_tool_call_ms"] is None and first_call is not None:
                    record["first_tool_call_ms"] = first_call["first_tool_call_ms"]
                record.update(await _first_call_prompt(timing.inner if timing else None, first_call, config))
                record["cold"] = (index == 0) if config.cold_prefix else None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a harness-level failure is data, not the end of the run
                record = {"harness_error": f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
                          "expected": [e.name for e in expected], "metrics": None, "events": []}
            records.append({**base, **record})
    finally:
        await runtime.aclose()
    return records


async def _first_call_prompt(client: Any, call: dict[str, Any] | None, config: BenchConfig) -> dict[str, Any]:
    """The first ChatAgent call's prompt tokens and who counted them: the provider's usage, else the server on a
    non-streamed replay (`max_tokens` 1, after the turn), else our estimate."""
    if call is None:
        return {"first_call_prompt_tokens": None, "first_call_prompt_source": None}
    stats: CallStats = call["stats"]
    if stats.usage_source == "provider":
        return {"first_call_prompt_tokens": stats.prompt_tokens, "first_call_prompt_source": "provider"}
    estimate = {"first_call_prompt_tokens": stats.prompt_tokens, "first_call_prompt_source": "estimate"}
    if not config.count_prompt_tokens or client is None:
        return estimate
    request = call["request"]
    body: dict[str, Any] = {"model": request["model"], "messages": request["messages"], "max_tokens": 1,
                            "temperature": 0}
    if request.get("tools") and "tools" not in client.unsupported:  # exactly what the stream sent
        body["tools"] = request["tools"]
        if request.get("tool_choice") is not None:
            body["tool_choice"] = request["tool_choice"]
    counted = CallStats(purpose="prompt_count")
    try:
        await client.complete(counted, **body)
    except LLMFault:
        return estimate
    if counted.usage_source != "provider":
        return estimate
    return {"first_call_prompt_tokens": counted.prompt_tokens, "first_call_prompt_source": "server_replay",
            "first_call_prompt_estimate": stats.prompt_tokens}


async def _collect(runner, text: str) -> list[Any]:
    items = []
    async with aclosing(runner.run(message_event(text, source="bench"))) as stream:
        async for item in stream:
            items.append(item)
    return items


def evaluate_turn(items: list[Any], expected: list[ExpectedEvent], *, runtime, audit: MemoryAudit,
                  config: BenchConfig, started: float, agent_calls_before: int) -> dict[str, Any]:
    """Per-turn metrics (from TurnEnd) plus correctness against the labels of the enabled events."""
    end = items[-1] if items and isinstance(items[-1], TurnEnd) else None
    if end is None:
        raise RuntimeError("the turn ended without a TurnEnd item")
    speeches = [i for i in items if isinstance(i, Speech)]
    outcomes = [i for i in items if isinstance(i, EventOutcome)]
    metrics = dict(end.metrics)
    ea_calls = runtime.event_agent.calls_since(agent_calls_before) if runtime.event_agent else []

    detected_records = {r["event_id"]: r for r in audit.of("event.detected")}
    fallback_records = {r["event_id"]: r for r in audit.of("event.fallback")}
    results: list[EventResult] = [o.result for o in outcomes]
    concrete = [concrete_arguments(e, config.request_time, config.timezone) for e in expected]
    unmatched = list(range(len(expected)))
    events = []
    for result in results:
        detected = detected_records.get(result.event_id, {})
        fallback = fallback_records.get(result.event_id)
        proposed = detected.get("proposed") or {}
        index = next((i for i in unmatched if expected[i].name == result.name), None)
        if index is not None:
            unmatched.remove(index)
        event: dict[str, Any] = {
            "name": result.name,
            "status": result.status.value,
            "resolution": result.resolution.value if result.resolution else None,
            "fallback_used": result.fallback_used,
            "fallback_tokens": result.fallback_tokens,
            "arguments": dict(result.arguments),
            "error_code": result.error_code,
            "latency_ms": round(result.timings.total_ms, 3),
            "proposed": dict(proposed) or None,
            "proposal_valid": _valid(runtime, result.name, proposed) if proposed else None,
            "arguments_error": detected.get("arguments_error"),
            "fallback_arguments": (fallback or {}).get("arguments") or None,
            "fallback_valid": (_valid(runtime, result.name, fallback["arguments"])
                               if fallback and fallback.get("arguments") else None),
            "normalized_valid": _valid(runtime, result.name, result.arguments),
            "matched": index is not None,
        }
        if index is not None:
            label = expected[index]
            event["expected_status"] = label.status
            event["status_ok"] = result.status.value == label.status
            event["args_ok"] = (label.status != "succeeded" or
                                (result.ok and arguments_match(result.name, concrete[index], result.arguments)))
            event["correct"] = event["status_ok"] and event["args_ok"]
        events.append(event)

    first_answer_at = next((s.at for s in speeches if s.answer == 1), None)
    search_done_at = next((o.at for o in outcomes if o.result.name == SEARCH), None)
    first_outcome_at = min((o.at for o in outcomes), default=None)
    visible = " ".join(s.text for s in speeches)
    rules = runtime.chat_agent.speakable_rules if runtime.chat_agent else speakable_rules(runtime.registry)
    leaks = speech_leaks(visible, rules)  # the guard's own detector on what was actually spoken
    first = metrics.get("first_answer") or {}
    return {
        "expected": [e.name for e in expected],
        "expected_statuses": [e.status for e in expected],
        "missed": [expected[i].name for i in unmatched],
        "detected": [e["name"] for e in events] + list(metrics.get("dropped_events") or []),
        "events": events,
        "metrics": metrics,
        "event_agent_prompt_tokens": sum(c.prompt_tokens for c in ea_calls),
        "event_agent_completion_tokens": sum(c.completion_tokens for c in ea_calls),
        "first_answer_text": " ".join(s.text for s in speeches if s.answer == 1 and s.kind == "reply"),
        "second_answer_text": " ".join(s.text for s in speeches if s.answer == 2),
        "leaks": leaks,
        "visible_leak": bool(leaks),
        "guard_hidden": guard_hidden(audit.records, end.turn_id),
        # the design requires the first answer not to wait for search; None when the turn had no search result
        "first_answer_before_search": (None if search_done_at is None
                                       else first_answer_at is not None and first_answer_at < search_done_at),
        # the design's first-answer order, as the child meets it: was a reply spoken before the first action settled?
        "reply_before_first_event": (None if first_outcome_at is None
                                     else first_answer_at is not None and first_answer_at < first_outcome_at),
        # direct-mode behaviour: did visible content come at all, and after the first tool-call delta?
        "first_content_ms": first.get("ttft_ms"),
        "first_tool_call_ms": first.get("first_tool_call_ms"),
        "turn_wall_ms": round((time.perf_counter() - started) * 1000, 3),
        "terminated": end.terminated,
    }


def _valid(runtime, name: str, arguments: Mapping[str, Any]) -> bool:
    try:
        return not schema_errors(runtime.registry, name, dict(arguments))
    except KeyError:
        return False
