"""The EventAgent fallback on a real endpoint: how fast and how right is `[llm] event_model` for the arguments?

    python -m toy_runtime.bench.event_agent --base-url http://127.0.0.1:8099/v1 --model qwen2.5-coder-0.5b

For every labelled event of the dataset that has required arguments (a volume, a reminder, a search), one EventAgent
call is made exactly as the kernel makes it (`EventAgent.propose` with nothing proposed and every required field
missing, the turn's words, the request time and the last visible exchanges), one at a time. Reported: call latency
(the first call of each event kind, whose prompt prefix nothing cached, apart from the rest), the share of answers
that satisfy the event's schema as given, and the share that is right (the labels' arguments) as given and once
the kernel's own resolver has read them with the words again (which fixes much on its own), plus the answer form
the server ended up honouring. Nothing here runs an event.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from ..agent.event_agent import EventAgent
from ..agent.llm import ChatClient
from ..events import EventRegistry, ResolveContext, resolve_deterministic, schema_errors
from ..fakes import memory_ports
from ..language import guess_locale
from ..plugins import default_registry
from .dataset import DEFAULT_REQUEST_TIME, DEFAULT_TIMEZONE, Dataset, arguments_match, concrete_arguments, load_dataset
from .metrics import dist, rate

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "bench" / "datasets" / "toy_turns.jsonl"


@dataclass(frozen=True)
class Case:
    """One labelled event the EventAgent is asked to fill in."""

    conversation: str
    name: str
    context: ResolveContext
    expected: dict[str, Any]


def cases(dataset: Dataset, registry: EventRegistry, request_time: datetime, timezone: str) -> list[Case]:
    """Every succeeded label whose event has required arguments, with the turn's words and the history before it."""
    out = []
    for conversation in dataset.conversations:
        history: list[dict[str, str]] = []
        for turn in conversation.turns:
            for event in turn.expected_events:
                definition = registry.lookup(event.name)
                if event.status != "succeeded" or definition is None or not definition.schema.get("required"):
                    continue
                context = ResolveContext(utterance=turn.user, request_time=request_time, timezone=timezone,
                                         history=tuple(history), locale=guess_locale(turn.user))
                out.append(Case(conversation.id, event.name, context,
                                concrete_arguments(event, request_time, timezone)))
            history += [{"role": "user", "content": turn.user},
                        {"role": "assistant", "content": turn.reply or "Okay."}]
    return out


async def run(agent: EventAgent, registry: EventRegistry, items: Sequence[Case]) -> list[dict[str, Any]]:
    """One EventAgent call per case, in order; one record each."""
    records = []
    seen: set[str] = set()
    for case in items:
        definition = registry.lookup(case.name)
        assert definition is not None
        missing = tuple(definition.schema.get("required") or ())
        started = time.perf_counter()
        answer = await agent.propose(definition, None, missing, case.context)
        elapsed_ms = (time.perf_counter() - started) * 1000
        arguments = answer.arguments if isinstance(answer.arguments, dict) else None
        valid = arguments is not None and not schema_errors(registry, case.name, arguments)
        # what the kernel does next: its resolver reads the words again with the proposal
        resolved = (resolve_deterministic(registry, definition, arguments, case.context)
                    if arguments is not None else None)
        right_after = (resolved is not None and resolved.outcome == "resolved"
                       and arguments_match(case.name, case.expected, resolved.arguments))
        right = valid and arguments_match(case.name, case.expected, arguments or {})
        records.append({"conversation": case.conversation, "name": case.name, "utterance": case.context.utterance,
                        "cold": case.name not in seen, "ms": round(elapsed_ms, 1), "arguments": arguments,
                        "error": answer.error, "valid": valid, "right": right, "right_after_resolver": right_after,
                        "form": agent.form,
                        "prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens})
        seen.add(case.name)
    return records


def summarize(records: Sequence[dict[str, Any]], model: str) -> dict[str, Any]:
    """Latency (cold/warm), schema-valid and right shares, per event kind and in all."""
    def group(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {"calls": len(rows), "ms_cold": dist(r["ms"] for r in rows if r["cold"]),
                "ms_warm": dist(r["ms"] for r in rows if not r["cold"]),
                "valid": rate(sum(r["valid"] for r in rows), len(rows)),
                "right": rate(sum(r["right"] for r in rows), len(rows)),
                "right_after_resolver": rate(sum(r["right_after_resolver"] for r in rows), len(rows))}
    names = sorted({r["name"] for r in records})
    return {"model": model, "forms": sorted({r["form"] for r in records}), "all": group(records),
            "by_event": {n: group([r for r in records if r["name"] == n]) for n in names}}


async def _main(args: argparse.Namespace) -> int:
    registry = default_registry(memory_ports())
    dataset = load_dataset(args.dataset)
    request_time = datetime.fromisoformat(DEFAULT_REQUEST_TIME)
    items = cases(dataset, registry, request_time, DEFAULT_TIMEZONE)[: args.limit]
    client = ChatClient(base_url=args.base_url, api_key=None, connect_timeout_s=5.0, read_timeout_s=args.timeout,
                        first_token_timeout_s=args.timeout)
    try:
        records = await run(EventAgent(client, model=args.model, max_tokens=args.max_tokens), registry, items)
    finally:
        await client.aclose()
    summary = summarize(records, args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "records.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(summary, indent=2, ensure_ascii=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: one model on one endpoint; writes records.jsonl and summary.json to --out."""
    p = argparse.ArgumentParser(prog="python -m toy_runtime.bench.event_agent", description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True, metavar="URL")
    p.add_argument("--model", required=True, metavar="M", help="the model to try as [llm] event_model")
    p.add_argument("--dataset", default=str(DEFAULT_DATASET), metavar="FILE")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N cases")
    p.add_argument("--max-tokens", type=int, default=120, metavar="N", help="as [llm] event_max_tokens")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per call (a cold CPU prefill)")
    p.add_argument("--out", default="bench-out/event-agent", metavar="DIR")
    return asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
