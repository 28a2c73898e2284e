"""Aggregation of per-turn bench records into the §8 metrics, per mode × condition.

Distributions are reported as median, p90 (linear interpolation) and n (the number of values, i.e. the run count
behind the figure); rates as value, numerator and denominator. Definitions (all over the enabled events only):

- precision = correctly named detections / all detections (unknown names count as wrong);
  recall = correctly named detections / expected events; multi-event recall = recall on turns expecting ≥ 2 events.
- status accuracy = matched events whose final status is the labelled one (succeeded / needs_clarification);
  argument accuracy = matched events expected to succeed that succeeded with arguments matching the label.
- valid before normalization = model-proposed arguments (ChatAgent tool-call arguments, EventAgent fallback
  arguments) that validate against the event's JSON Schema as-is; after = final normalized arguments that validate.
  Both leave out events labelled needs_clarification (incomplete on purpose); unexpected detections stay in.
- execution success = succeeded / events that reached a handler (succeeded, failed, timed out).
- deterministic hit rate = events resolved without the EventAgent LLM / events that went through resolution.
- cost = ChatAgent tokens × model price + EventAgent tokens × event-model price (USD per 1M tokens, prices.toml;
  a flat `price_per_mtok` overrides it, 0 for a local model).
- first-answer TTFT cold = the first turn of a conversation whose prompt starts with a unique line (no cached
  prefix on the server); warm = the later turns (the server may reuse the cached prefix).
- first-call prompt tokens = counted by the server (its usage, or a non-streamed replay of the request); the
  estimate is reported separately, only for calls the server did not count.
- visible leaks = turns whose spoken text still holds anything unspeakable (markup, emoji, JSON, tool-call syntax,
  event/tool names, catalog or instruction text), found by the speakable guard's own detector; guard = what the guard
  removed before speech (from the audit log), per kind, with text tool calls recovered or hidden and sentences cut by
  the token limit.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..agent.llm import TOKEN_ESTIMATOR, estimate_tokens
from ..agent.prompts import catalog_instruction, tools_instruction
from ..agent.speakable import SpeakableRules, detect
from ..events import EventRegistry
from .truth import group_truth

EXECUTED = ("succeeded", "failed", "timed_out")
COUNTED = ("provider", "server_replay")  # prompt-token sources that are the server's own count


# -- small statistics ---------------------------------------------------------------------------------

def dist(values: Iterable[float | None]) -> dict[str, Any]:
    """median / p90 / mean / n of the non-None values (all None when there are none)."""
    data = [float(v) for v in values if v is not None]
    if not data:
        return {"median": None, "p90": None, "mean": None, "n": 0}
    arr = np.asarray(data)
    return {"median": round(float(np.median(arr)), 3), "p90": round(float(np.percentile(arr, 90)), 3),
            "mean": round(float(arr.mean()), 3), "n": len(data)}


def rate(num: int, den: int) -> dict[str, Any]:
    """num/den with both counts kept; value None when den is 0."""
    return {"value": round(num / den, 4) if den else None, "num": num, "den": den}


# -- speakable text ------------------------------------------------------------------------------------

GUARD_AUDIT = ("chat.text_hidden", "chat.text_tool_call_recovered", "chat.text_tool_call_hidden",
               "chat.markup_stripped", "chat.partial_sentence_dropped", "speech.hidden")


def speech_leaks(text: str, rules: SpeakableRules) -> list[str]:
    """Kinds of unspeakable text found in what was spoken (the guard's detector; [] when clean)."""
    return [finding.kind for finding in detect(text, rules)]


def guard_hidden(records: Iterable[Mapping[str, Any]], turn_id: str) -> dict[str, int]:
    """What the speakable guard removed in one turn, per kind, from its audit records."""
    counts: Counter[str] = Counter()
    for record in records:
        if record.get("turn_id") != turn_id or record["kind"] not in GUARD_AUDIT:
            continue
        kind = record["kind"]
        if kind == "chat.markup_stripped":
            counts.update(record.get("counts") or {})
        elif kind == "chat.text_hidden":
            counts[record["hidden"]] += 1
        elif kind == "speech.hidden":
            counts.update(record.get("hidden") or [])
        else:
            counts[kind.removeprefix("chat.")] += 1
    return dict(counts)


# -- prices ---------------------------------------------------------------------------------------------

def load_prices(path: str | Path | None) -> dict[str, Any]:
    """`[models."name"] input = .., output = ..` (USD per 1M tokens) and `[aliases] name = "priced-as"`."""
    if path is None or not Path(path).exists():
        return {"models": {}, "aliases": {}, "source": None}
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    return {"models": dict(data.get("models", {})), "aliases": dict(data.get("aliases", {})), "source": str(path)}


def price_of(prices: Mapping[str, Any], model: str | None) -> tuple[dict[str, float] | None, str | None]:
    """(price, priced-as name) for a model, following one alias; (None, None) when unknown."""
    if not model:
        return None, None
    name = prices.get("aliases", {}).get(model, model)
    entry = prices.get("models", {}).get(name)
    if not entry or "input" not in entry or "output" not in entry:
        return None, None
    return {"input": float(entry["input"]), "output": float(entry["output"])}, name


# -- catalog vs schema --------------------------------------------------------------------------------

def prompt_cost(registry: EventRegistry) -> dict[str, Any]:
    """Tokens of the dual_agent catalog message vs the direct-mode instruction + tools JSON, measured on its own."""
    catalog = catalog_instruction(registry)
    tools = registry.provider_tools()
    tools_json = json.dumps(tools, ensure_ascii=False)
    per_event = {}
    for definition in registry:
        single = EventRegistry([definition])
        per_event[definition.name] = {
            "catalog_line_tokens": estimate_tokens(f"- {definition.name}: {definition.description}"),
            "schema_tokens": estimate_tokens(json.dumps(single.provider_tools(), ensure_ascii=False)),
        }
    return {
        "events": len(registry),
        "estimator": TOKEN_ESTIMATOR,
        "catalog_message_tokens": estimate_tokens(catalog) + 4 if len(registry) else 0,
        "tools_instruction_tokens": estimate_tokens(tools_instruction()) + 4 if len(registry) else 0,
        "tools_schema_tokens": estimate_tokens(tools_json) if tools else 0,
        "catalog_chars": len(catalog) if len(registry) else 0,
        "tools_schema_chars": len(tools_json) if tools else 0,
        "per_event": per_event,
    }


# -- aggregation --------------------------------------------------------------------------------------

def group_key(record: Mapping[str, Any]) -> str:
    return f"{record['mode']}/{record['condition']}"


def summarize(records: Sequence[Mapping[str, Any]], *, model: str, event_model: str | None = None,
              prices: Mapping[str, Any] | None = None, registry: EventRegistry | None = None,
              meta: Mapping[str, Any] | None = None, price_per_mtok: float | None = None) -> dict[str, Any]:
    """The whole report as a JSON-friendly dict: per-group metrics, prompt cost, notes.

    `price_per_mtok` (USD per 1M tokens, input and output alike) replaces the price table for both models: 0 for
    a model running locally."""
    prices = prices or {"models": {}, "aliases": {}}
    chat_price, chat_priced_as = price_of(prices, model)
    event_price, event_priced_as = price_of(prices, event_model or model)
    notes = []
    if price_per_mtok is not None:
        chat_price = event_price = {"input": float(price_per_mtok), "output": float(price_per_mtok)}
        chat_priced_as = event_priced_as = f"flat {price_per_mtok:g} USD / 1M tokens"
        notes.append(f"cost: every token priced at {price_per_mtok:g} USD per 1M"
                     + (" (a local model: no per-token price)" if price_per_mtok == 0 else ""))
    elif chat_price is None or event_price is None:
        missing = [m for m, p in ((model, chat_price), (event_model or model, event_price)) if p is None]
        notes.append(f"cost is null: no price for {', '.join(sorted(set(missing)))} in "
                     f"{prices.get('source') or 'the price table'}")
    elif chat_priced_as != model or event_priced_as != (event_model or model):
        notes.append(f"cost: {model} priced as {chat_priced_as}, event model priced as {event_priced_as} "
                     "(aliases in the price table)")

    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        groups[group_key(record)].append(record)
    order = {"dual_agent": 0, "chat_agent_tools": 1, "disabled": 0, "enabled": 1}
    ranked = sorted(groups.items(), key=lambda kv: tuple(order.get(p, 9) for p in kv[0].split("/")) + (kv[0],))
    out_groups = {key: _group(rows, chat_price, event_price) for key, rows in ranked}
    if any(g["tokens"]["usage_source"].get("estimate") for g in out_groups.values()):
        notes.append(f"some token counts are estimates ({TOKEN_ESTIMATOR}): the provider sent no usage")
    return {
        "meta": dict(meta or {}),
        "model": model,
        "event_model": event_model or model,
        "prices": {"chat": chat_price, "chat_priced_as": chat_priced_as, "event": event_price,
                   "event_priced_as": event_priced_as, "source": prices.get("source")},
        "prompt_cost": prompt_cost(registry) if registry is not None else None,
        "groups": out_groups,
        "notes": notes,
    }


def _group(rows: Sequence[Mapping[str, Any]], chat_price, event_price) -> dict[str, Any]:
    ok_rows = [r for r in rows if r.get("metrics")]
    m = [r["metrics"] for r in ok_rows]
    first = [x.get("first_answer") or {} for x in m]
    second = [x.get("second_answer") for x in m if x.get("second_answer")]
    events = [e for r in ok_rows for e in r["events"]]
    faults = Counter(x["fault"] for x in m if x.get("fault"))
    harness_errors = Counter(r["harness_error"].split(":")[0] for r in rows if r.get("harness_error"))

    # -- tokens, calls, cost
    usage: Counter[str] = Counter()  # calls per usage source
    for x in m:
        for call in (x.get("first_answer"), x.get("second_answer")):
            if call:
                usage[call.get("usage_source") or "estimate"] += 1
    ea_prompt = [r.get("event_agent_prompt_tokens", 0) for r in ok_rows]
    ea_completion = [r.get("event_agent_completion_tokens", 0) for r in ok_rows]
    costs = None
    if chat_price is not None and event_price is not None:
        costs = [(x["prompt_tokens"] * chat_price["input"] + x["completion_tokens"] * chat_price["output"]
                  + ep * event_price["input"] + ec * event_price["output"]) / 1e6
                 for x, ep, ec in zip(m, ea_prompt, ea_completion)]
    by_category: dict[str, list[int]] = defaultdict(list)
    for r in ok_rows:
        by_category[r["category"]].append(r["metrics"]["llm_calls"])

    # -- accuracy
    expected_total = sum(len(r["expected"]) for r in ok_rows)
    detected_total = sum(len(r["detected"]) for r in ok_rows)
    matched = [e for e in events if e.get("matched")]
    multi_rows = [r for r in ok_rows if len(r["expected"]) >= 2]
    multi_expected = sum(len(r["expected"]) for r in multi_rows)
    multi_matched = sum(1 for r in multi_rows for e in r["events"] if e.get("matched"))
    expect_success = [e for e in matched if e.get("expected_status") == "succeeded"]
    # events that should end in clarification are incomplete by design: they are left out of the validity rates
    settleable = [e for e in events if e.get("expected_status") != "needs_clarification"]
    proposals = [e["proposal_valid"] for e in settleable if e.get("proposal_valid") is not None]
    fallback_props = [e["fallback_valid"] for e in settleable if e.get("fallback_valid") is not None]
    executed = [e for e in events if e["status"] in EXECUTED]
    resolved = [e for e in events if e.get("resolution")]
    deterministic = sum(1 for e in resolved if e["resolution"] != "llm_fallback" and not e["fallback_used"])
    correct_events = sum(1 for e in matched if e.get("correct"))
    successful_events = sum(1 for e in expect_success if e.get("correct"))

    # -- direct-mode behaviour: event turns, visible content vs tool calls
    event_rows = [r for r in ok_rows if r["detected"]]
    plain_rows = [r for r in ok_rows if not r["expected"] and not r["detected"]]
    no_content = sum(1 for r in event_rows if r.get("first_content_ms") is None)
    tool_timed = [r for r in event_rows if r.get("first_tool_call_ms") is not None]
    after_tool = sum(1 for r in tool_timed if r.get("first_content_ms") is None
                     or r["first_content_ms"] > r["first_tool_call_ms"])
    ordered = [r["reply_before_first_event"] for r in ok_rows if r.get("reply_before_first_event") is not None]

    latency_by_event: dict[str, list[float]] = defaultdict(list)
    for e in events:
        latency_by_event[e["name"]].append(e["latency_ms"])
    dispatch = [d["dispatch_delay_ms"] for x in m for d in x.get("events") or [] if d.get("dispatch_delay_ms") is not None]
    search_rows = [r for r in ok_rows if r.get("first_answer_before_search") is not None]

    return {
        "runs": {"turns": len(rows), "completed_turns": len(ok_rows),
                 "conversations": len({(r["repeat"], r["conversation"]) for r in rows}),
                 "repeats": len({r["repeat"] for r in rows}), "faults": dict(faults),
                 "fault_turns": sum(faults.values()), "harness_errors": dict(harness_errors)},
        "latency_ms": {
            "first_answer_ttft": dist(f.get("ttft_ms") for f in first),
            "first_answer_ttft_cold": dist((r["metrics"].get("first_answer") or {}).get("ttft_ms")
                                           for r in ok_rows if r.get("cold") is True),
            "first_answer_ttft_warm": dist((r["metrics"].get("first_answer") or {}).get("ttft_ms")
                                           for r in ok_rows if r.get("cold") is False),
            "first_answer_first_chunk": dist(f.get("first_chunk_ms") for f in first),
            "first_answer_completion": dist(f.get("total_ms") for f in first),
            "first_speech": dist(x.get("first_speech_ms") for x in m),
            "second_answer_ttft": dist(s.get("ttft_ms") for s in second),
            "second_speech": dist(x.get("second_speech_ms") for x in m),
            "total_turn": dist(x.get("total_ms") for x in m),
            "first_answer_ttft_ordinary": dist((r["metrics"].get("first_answer") or {}).get("ttft_ms")
                                               for r in ok_rows if r["category"] == "ordinary"),
            "first_answer_ttft_event_turns": dist((r["metrics"].get("first_answer") or {}).get("ttft_ms")
                                                  for r in event_rows),
        },
        "tokens": {
            "chat_prompt_per_turn": dist(x.get("prompt_tokens") for x in m),
            "chat_completion_per_turn": dist(x.get("completion_tokens") for x in m),
            "first_call_prompt": dist(f.get("prompt_tokens") for f in first if f),
            "first_call_prompt_counted": dist(r.get("first_call_prompt_tokens") for r in ok_rows
                                              if r.get("first_call_prompt_source") in COUNTED),
            "first_call_prompt_estimated": dist(r.get("first_call_prompt_tokens") for r in ok_rows
                                                if r.get("first_call_prompt_source") == "estimate"),
            "first_call_prompt_source": dict(Counter(r["first_call_prompt_source"] for r in ok_rows
                                                     if r.get("first_call_prompt_source"))),
            "usage_source": dict(usage),
            "estimator": TOKEN_ESTIMATOR if usage.get("estimate") else None,
        },
        "calls": {
            "llm_calls_per_turn": dist(x.get("llm_calls") for x in m),
            "chat_calls_per_turn": dist(x.get("chat_calls") for x in m),
            "llm_calls_by_category": {k: round(sum(v) / len(v), 3) for k, v in sorted(by_category.items())},
            "ordinary_turns_one_call": rate(sum(1 for r in ok_rows if r["category"] == "ordinary"
                                                and r["metrics"]["llm_calls"] == 1),
                                            sum(1 for r in ok_rows if r["category"] == "ordinary")),
            "second_chat_call_turns": rate(sum(1 for x in m if x.get("chat_calls", 0) >= 2), len(m)),
        },
        "event_agent": {
            "calls": sum(x["event_agent"]["calls"] for x in m),
            "calls_per_turn": dist(x["event_agent"]["calls"] for x in m),
            "tokens_total": sum(x["event_agent"]["tokens"] for x in m),
            "tokens_per_call": dist(e["fallback_tokens"] for e in events if e["fallback_used"]),
            "fallback_rate": rate(sum(1 for e in events if e["fallback_used"]), len(events)),
        },
        "resolution": {
            "deterministic_hit_rate": rate(deterministic, len(resolved)),
            "paths": dict(Counter(e.get("resolution") or "none" for e in events)),
        },
        "events": {
            "count": len(events),
            "dispatch_delay_ms": dist(dispatch),
            "latency_ms": {name: dist(v) for name, v in sorted(latency_by_event.items())},
            "statuses": dict(Counter(e["status"] for e in events)),
        },
        "accuracy": {
            "precision": rate(len(matched), detected_total),
            "recall": rate(len(matched), expected_total),
            "multi_event_recall": rate(multi_matched, multi_expected),
            "status_accuracy": rate(sum(1 for e in matched if e.get("status_ok")), len(matched)),
            "argument_accuracy": rate(sum(1 for e in expect_success if e.get("args_ok")), len(expect_success)),
            "valid_before_normalization": rate(sum(proposals) + sum(fallback_props),
                                               len(proposals) + len(fallback_props)),
            "valid_before_chat_proposals": rate(sum(proposals), len(proposals)),
            "valid_before_fallback_proposals": rate(sum(fallback_props), len(fallback_props)),
            "valid_after_normalization": rate(sum(1 for e in settleable if e["normalized_valid"]), len(settleable)),
            "execution_success": rate(sum(1 for e in executed if e["status"] == "succeeded"), len(executed)),
            "correct_events": rate(correct_events, expected_total),
            "visible_leaks": sum(1 for r in ok_rows if r.get("visible_leak")),
            "leak_kinds": dict(Counter(k for r in ok_rows for k in set(r.get("leaks") or ()))),  # turns per kind
            "first_answer_nonempty": rate(sum(1 for r in ok_rows if r.get("first_answer_text")), len(ok_rows)),
            "first_answer_before_search": rate(sum(1 for r in search_rows if r["first_answer_before_search"]),
                                               len(search_rows)),
        },
        "truth": group_truth(ok_rows),
        "speakable_guard": {
            "turns_with_hidden_text": rate(sum(1 for r in ok_rows if r.get("guard_hidden")), len(ok_rows)),
            "hidden_by_kind": dict(sum((Counter(r.get("guard_hidden") or {}) for r in ok_rows), Counter())),
        },
        "direct_mode": {
            "event_turns": len(event_rows),
            "no_visible_content": rate(no_content, len(event_rows)),
            "content_after_first_tool_call": (rate(after_tool, len(tool_timed)) if tool_timed else None),
            "reply_before_first_event": rate(sum(ordered), len(ordered)) if ordered else None,
            "ttft_ordinary_vs_event_turns_ms": [dist((r["metrics"].get("first_answer") or {}).get("ttft_ms")
                                                     for r in plain_rows)["median"],
                                                dist((r["metrics"].get("first_answer") or {}).get("ttft_ms")
                                                     for r in event_rows)["median"]],
        },
        "cost_usd": None if costs is None else {
            "per_1k_turns": dist(c * 1000 for c in costs),  # per-turn costs are too small to round
            "total": round(sum(costs), 6),
            "per_successful_event": round(sum(costs) / successful_events, 6) if successful_events else None,
            "successful_events": successful_events,
        },
    }
