"""`toy-runtime bench modes`: replay the dataset in both invocation modes and write the comparison report.

Hook into the main CLI with `register(sub)` (it adds the `bench` parent and returns its subparsers, so other bench
commands can join it). Standalone: `python -m toy_runtime.bench.cli modes --scripted --out DIR`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from .dataset import DEFAULT_REQUEST_TIME, DEFAULT_TIMEZONE, DatasetError, load_dataset

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATASET = "bench/datasets/toy_turns.jsonl"
DEFAULT_PRICES = "bench/prices.toml"
EXIT_USAGE = 2


def _repo_file(name: str) -> str:
    """A repo-relative default that also works when run from another directory."""
    return name if Path(name).exists() else str(REPO_ROOT / name)


def register(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Add `bench` (with `modes`) to a subparsers action; returns the `bench` subparsers for more commands."""
    bench = subparsers.add_parser("bench", help="benchmarks")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True, metavar="{modes,pipeline,voice,ears,hearing,fleet}")
    add_modes_parser(bench_sub)
    from .pipeline import add_pipeline_parser

    add_pipeline_parser(bench_sub)
    from .voice_cli import add_voice_parser

    add_voice_parser(bench_sub)
    from .ears_cli import add_ears_parser

    add_ears_parser(bench_sub)
    from .hearing_cli import add_hearing_parser

    add_hearing_parser(bench_sub)
    from .fleet import add_fleet_parser

    add_fleet_parser(bench_sub)
    return bench_sub


def add_modes_parser(bench_sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `modes` command parser."""
    p = bench_sub.add_parser(
        "modes", help="compare dual_agent and chat_agent_tools on the labelled dataset",
        description="Replay the dataset in dual_agent and chat_agent_tools, each with all events disabled and all "
                    "four enabled, against an OpenAI-compatible endpoint (API key from OPENAI_API_KEY).")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (ignored with --scripted)")
    p.add_argument("--model", metavar="M", help="ChatAgent model (default with --scripted: scripted-model)")
    p.add_argument("--event-model", metavar="M", help="EventAgent fallback model (default: --model)")
    p.add_argument("--dataset", metavar="FILE", default=None, help=f"JSONL dataset (default {DEFAULT_DATASET})")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="replays of the whole dataset (default 1)")
    p.add_argument("--concurrency", type=int, default=2, metavar="N",
                   help="conversations in flight at once (default 2; use 1 for rate-limited providers)")
    p.add_argument("--out", metavar="DIR", default="bench-out", help="report directory (default bench-out)")
    p.add_argument("--prices", metavar="FILE", default=None, help=f"price table (default {DEFAULT_PRICES})")
    p.add_argument("--scripted", action="store_true",
                   help="serve the dataset oracle from an in-process scripted server instead of --base-url")
    p.add_argument("--modes", default="dual_agent,chat_agent_tools", help="comma-separated modes")
    p.add_argument("--conditions", default="disabled,enabled", help="comma-separated: disabled,enabled")
    p.add_argument("--conversations", metavar="IDS", help="comma-separated conversation ids (default all)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N conversations")
    p.add_argument("--seed", type=int, default=0, help="job order shuffle seed")
    p.add_argument("--request-time", default=DEFAULT_REQUEST_TIME, help="pinned runtime clock (RFC3339)")
    p.add_argument("--timezone", default=DEFAULT_TIMEZONE, help="session time zone")
    p.add_argument("--temperature", type=float, help="sampling temperature (same for both modes)")
    p.add_argument("--max-tokens", type=int, help="ChatAgent output budget (same for both modes)")
    p.add_argument("--llm-profile", choices=["hosted", "local"], default=None,
                   help="the runtime's [llm] profile: its limits apply unless a flag below sets one (default hosted)")
    p.add_argument("--first-token-timeout", type=float, default=None, metavar="S",
                   help="seconds to the first token before a fault (default: the runtime's [llm] "
                        "first_token_timeout_s, so a wait the child would hear shows up as a fault)")
    p.add_argument("--read-timeout", type=float, default=None, metavar="S",
                   help="seconds of stream silence before a fault (default: the runtime's [llm] read_timeout_s)")
    p.add_argument("--price-per-mtok", type=float, default=None, metavar="USD",
                   help="flat price per 1M tokens for both models, replacing the price table (default: 0 for a "
                        "loopback endpoint or --scripted, else the table)")
    p.add_argument("--warm-only", action="store_true",
                   help="no unique first line per conversation (the first call may then hit a cached prefix)")
    p.add_argument("--no-prompt-count", action="store_true",
                   help="never replay a first call to have the server count its prompt (a paid endpoint "
                        "without streamed usage; the estimate is reported instead)")
    p.add_argument("--tools-reply-first", action="store_true",
                   help="chat_agent_tools: ask the model to reply before it calls tools ([agent] tools_reply_first)")
    p.add_argument("--turn-timeout", type=float, default=90.0, help="harness limit for one turn, seconds")
    g = p.add_argument_group("scripted oracle timing (with --scripted)")
    g.add_argument("--zero-delay", action="store_true", help="no simulated latency at all")
    g.add_argument("--ttft-base-ms", type=float, default=None, help="base time to first token (default 200)")
    g.add_argument("--prefill-ms-per-token", type=float, default=None, help="prompt cost (default 0.4)")
    g.add_argument("--decode-ms-per-token", type=float, default=None, help="per streamed chunk (default 15)")
    g.add_argument("--tool-order", choices=["content_first", "tools_first", "tools_only"], default="content_first",
                   help="how the oracle orders visible text and tool calls in chat_agent_tools mode")
    p.set_defaults(func=cmd_bench_modes)
    return p


def _pacing(args: argparse.Namespace):
    from .oracle import Pacing

    if args.zero_delay:
        return Pacing(tool_order=args.tool_order)
    base = Pacing.realistic(args.tool_order)
    return Pacing(
        ttft_base_s=base.ttft_base_s if args.ttft_base_ms is None else args.ttft_base_ms / 1000,
        prefill_s_per_token=(base.prefill_s_per_token if args.prefill_ms_per_token is None
                             else args.prefill_ms_per_token / 1000),
        decode_s_per_token=(base.decode_s_per_token if args.decode_ms_per_token is None
                            else args.decode_ms_per_token / 1000),
        chunk_chars=base.chunk_chars, tool_order=args.tool_order)


def is_loopback(url: str | None) -> bool:
    """True for an endpoint on this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def cmd_bench_modes(args: argparse.Namespace) -> int:
    """Run the mode comparison and write the report; prints where it went and the headline numbers."""
    try:
        dataset = load_dataset(args.dataset or _repo_file(DEFAULT_DATASET))
    except DatasetError as exc:
        print(f"toy-runtime: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.conversations or args.limit:
        dataset = dataset.subset(list(_split(args.conversations)) if args.conversations else None, args.limit)
    if not args.scripted and not (args.base_url and args.model):
        print("toy-runtime: bench modes needs --base-url and --model (or --scripted)", file=sys.stderr)
        return EXIT_USAGE
    try:
        request_time = datetime.fromisoformat(args.request_time)
        if request_time.tzinfo is None:
            raise ValueError("needs an offset")
    except ValueError as exc:
        print(f"toy-runtime: --request-time: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_run(args, dataset, request_time))
    except ValueError as exc:  # bad modes/conditions/counts
        print(f"toy-runtime: {exc}", file=sys.stderr)
        return EXIT_USAGE


async def _run(args: argparse.Namespace, dataset, request_time: datetime) -> int:
    from ..fakes import memory_ports
    from ..plugins import default_registry
    from .metrics import load_prices, summarize
    from .modes import BenchConfig, run_bench
    from .oracle import Oracle, start_oracle_server
    from ..config import load_settings
    from .report import first_call_prompt, write_report

    server = oracle = None
    model: str = args.model or "scripted-model"  # cmd_bench_modes asked for --model unless --scripted
    base_url = args.base_url
    pacing = _pacing(args) if args.scripted else None
    if args.scripted:
        oracle = Oracle(dataset, request_time=request_time, timezone=args.timezone, pacing=pacing)
        server = start_oracle_server(oracle, model=model)
        base_url = server.url
    config = BenchConfig(base_url=base_url, model=model, event_model=args.event_model,
                         api_key=os.environ.get("OPENAI_API_KEY"), modes=_split(args.modes),
                         conditions=_split(args.conditions), repeat=args.repeat, concurrency=args.concurrency,
                         request_time=request_time, timezone=args.timezone, seed=args.seed,
                         turn_timeout_s=args.turn_timeout, read_timeout_s=args.read_timeout,
                         first_token_timeout_s=args.first_token_timeout, cold_prefix=not args.warm_only,
                         count_prompt_tokens=not args.no_prompt_count,
                         temperature=args.temperature, max_tokens=args.max_tokens,
                         tools_reply_first=args.tools_reply_first, llm_profile=args.llm_profile)
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\rbench: {done}/{total} conversations", end="\n" if done == total else "", file=sys.stderr,
                  flush=True)
        elif done == total or done % 50 == 0:
            print(f"bench: {done}/{total} conversations", file=sys.stderr, flush=True)

    try:
        records = await run_bench(config, dataset, progress=progress)
    finally:
        if server is not None:
            await asyncio.to_thread(server.close)
    overrides: dict[str, Any] = {"llm": {"profile": args.llm_profile}} if args.llm_profile else {}
    limits = load_settings(env={}, **overrides)
    meta: dict[str, Any] = {
        "endpoint": "scripted oracle (in-process)" if args.scripted else base_url,
        "dataset": dataset.path, "conversations": len(dataset.conversations), "turns": dataset.turn_count,
        "repeat": args.repeat, "concurrency": args.concurrency, "request_time": request_time.isoformat(),
        "timezone": args.timezone, "wall_s": round(time.perf_counter() - started, 1),
        "llm_profile": args.llm_profile or "hosted",
        "first_token_timeout_s": args.first_token_timeout or limits.llm.first_token_timeout_s,
        "read_timeout_s": args.read_timeout or limits.llm.read_timeout_s,
        "batch_deadline_s": limits.events.batch_deadline_s,
        "cold_prefix": not args.warm_only,
    }
    if pacing is not None:
        meta["oracle_pacing"] = pacing.as_dict()
    if oracle is not None and oracle.stats.unknown_texts:
        meta["oracle_unknown_texts"] = sorted(set(oracle.stats.unknown_texts))
    prices = load_prices(args.prices or _repo_file(DEFAULT_PRICES))
    price = args.price_per_mtok
    if price is None and (args.scripted or is_loopback(base_url)):
        price = 0.0  # a model on this machine costs no tokens
    summary = summarize(records, model=model, event_model=args.event_model, prices=prices,
                        registry=default_registry(memory_ports()), meta=meta, price_per_mtok=price)
    paths = write_report(args.out, summary, records)
    print(f"report: {paths['markdown']}  json: {paths['json']}  plot: {paths['plot']}")
    for key, group in summary["groups"].items():
        cold, warm = group["latency_ms"]["first_answer_ttft_cold"], group["latency_ms"]["first_answer_ttft_warm"]
        tokens = first_call_prompt(group)
        counted = "server-counted" if group["tokens"]["first_call_prompt_counted"]["n"] else "estimated"
        acc = group["accuracy"]
        print(f"  {key:28s} TTFT median cold {cold['median']} ms (n={cold['n']}) / warm {warm['median']} ms "
              f"(n={warm['n']}), first-call prompt tokens {tokens['median']} ({counted}), "
              f"precision {acc['precision']['value']}, recall {acc['recall']['value']}, "
              f"faults {group['runs']['fault_turns']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: `python -m toy_runtime.bench.cli modes ...`."""
    parser = argparse.ArgumentParser(prog="python -m toy_runtime.bench.cli",
                                     description="toy-runtime benchmarks")
    sub = parser.add_subparsers(dest="bench_command", required=True)
    add_modes_parser(sub)
    from .voice_cli import add_voice_parser

    add_voice_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
