"""`toy-runtime events list|resolve`: inspect the event registry over in-memory ports."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from .common import CliError, add_config, settings_for


def cmd_events_list(args: argparse.Namespace) -> int:
    """Print every registered event (a table, or JSON with the schemas)."""
    from ..app.runtime import offline_registry

    registry = offline_registry(settings_for(args))
    rows = [
        {
            "name": d.name,
            "version": d.version,
            "tool_name": d.tool_name,
            "description": d.description,
            "schema": d.schema,
            "result_policy": d.result_policy.value,
            "risk": d.risk.value,
            "terminal": d.terminal,
            "read_only": d.read_only,
            "llm_fallback": d.llm_fallback,
            "timeout_s": d.timeout_s,
            "concurrency_class": d.concurrency_class,
        }
        for d in registry
    ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        print(f"{'EVENT':<28} {'TOOL':<22} {'RESULT POLICY':<20} DESCRIPTION")
        for row in rows:
            print(f"{row['name']:<28} {row['tool_name']:<22} {row['result_policy']:<20} {row['description']}")
    return 0


def cmd_events_resolve(args: argparse.Namespace) -> int:
    """Run one event's deterministic resolver and validation on the given text/arguments and print the result."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from ..app.runtime import offline_registry
    from ..events import ResolveContext, resolve_deterministic
    from ..language import guess_locale

    settings = settings_for(args)
    registry = offline_registry(settings)
    definition = registry.lookup(args.name)
    if definition is None:
        raise CliError(f"unknown event {args.name!r}; known: {', '.join(registry.names)}")
    zone_name = args.tz or settings.session.timezone
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CliError(f"--tz: unknown IANA time zone {zone_name!r}") from None
    if args.now:
        try:
            now = datetime.fromisoformat(args.now.replace("Z", "+00:00"))
        except ValueError:
            raise CliError(f"--now: not an RFC3339 time: {args.now!r}") from None
        now = now.replace(tzinfo=zone) if now.tzinfo is None else now.astimezone(zone)
    else:
        now = datetime.now(zone)
    proposed = None
    if args.args:
        try:
            proposed = json.loads(args.args)
        except ValueError as exc:
            raise CliError(f"--args: not valid JSON: {exc}") from None
        if not isinstance(proposed, dict):
            raise CliError("--args: must be a JSON object")
    context = ResolveContext(utterance=args.text or "", request_time=now, timezone=zone_name,
                             locale=guess_locale(args.text))
    resolved = resolve_deterministic(registry, definition, proposed, context)
    payload = {
        "event": definition.name,
        "status": resolved.outcome,
        "arguments": dict(resolved.arguments),
        "missing": list(resolved.missing),
        "error": resolved.error,
        "question": resolved.question,
    }
    if args.json:
        print(json.dumps(payload, ensure_ascii=False))
    else:
        print(f"{payload['status']}: {json.dumps(payload['arguments'], ensure_ascii=False)}"
              + (f" missing={payload['missing']}" if payload["missing"] else "")
              + (f" error={payload['error']}" if payload["error"] else ""))
    return 0


def register(sub) -> None:
    """Add `events list` and `events resolve`."""
    events = sub.add_parser("events", help="inspect the event registry")
    events_sub = events.add_subparsers(dest="events_command", required=True, metavar="SUBCOMMAND")
    p = events_sub.add_parser("list", help="list registered events")
    add_config(p)
    p.add_argument("--json", action="store_true", help="print the definitions as a JSON list (with schemas)")
    p.set_defaults(func=cmd_events_list)
    p = events_sub.add_parser("resolve", help="run an event's deterministic resolver + validation")
    add_config(p)
    p.add_argument("name", help="namespaced event name or provider tool name")
    p.add_argument("--text", default="", help="the user's utterance")
    p.add_argument("--args", help="proposed arguments as a JSON object")
    p.add_argument("--now", help="request time (RFC3339); default now")
    p.add_argument("--tz", help="IANA time zone of the session")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=cmd_events_resolve)
