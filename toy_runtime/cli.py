"""The `toy-runtime` command line. Each subcommand parses its flags, loads settings once and runs."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import datetime
from typing import Any, Sequence

from .startup import process_marks

process_marks().mark("interpreter")  # before the config's pydantic import: what Python itself took

from .config import ConfigError, Settings, load_settings, with_updates  # noqa: E402 - timed after the mark
from .errors import StartError  # noqa: E402

EXIT_USAGE = 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML profile loaded on top of the defaults")


def _add_turn_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every command that runs turns (chat, demo, run, ptt)."""
    _add_config(parser)
    parser.add_argument("--mode", choices=["dual_agent", "chat_agent_tools"], help="tool invocation mode")
    parser.add_argument("--llm-base-url", metavar="URL", help="OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--llm-model", metavar="MODEL")
    parser.add_argument("--volume-backend", choices=["memory", "alsa"])
    parser.add_argument("--mqtt-url", metavar="URL", help="mqtt://HOST:PORT or mqtts://HOST:PORT")
    parser.add_argument("--device-id", metavar="ID")
    parser.add_argument("--web", metavar="HOST:PORT", help="serve the live debug console there (docs/console.md)")


def _settings_for(args: argparse.Namespace) -> Settings:
    settings = load_settings(getattr(args, "config", None))
    updates: dict[str, dict[str, Any]] = {}
    if getattr(args, "mode", None):
        updates.setdefault("agent", {})["tool_invocation_mode"] = args.mode
    if getattr(args, "llm_base_url", None):
        updates.setdefault("llm", {})["base_url"] = args.llm_base_url
    if getattr(args, "llm_model", None):
        updates.setdefault("llm", {})["model"] = args.llm_model
    if getattr(args, "volume_backend", None):
        updates.setdefault("volume", {})["backend"] = args.volume_backend
    if getattr(args, "mqtt_url", None):
        updates.setdefault("mqtt", {})["url"] = args.mqtt_url
    if getattr(args, "device_id", None):
        updates.setdefault("mqtt", {})["device_id"] = args.device_id
    if getattr(args, "web", None):
        updates.setdefault("web", {})["listen"] = args.web
    return with_updates(settings, **updates) if updates else settings


# -- events ------------------------------------------------------------------------------------------


def _offline_registry(settings: Settings):
    """The registry over in-memory ports: for inspecting and resolving, never for side effects."""
    from .fakes.calendar import MemoryCalendarStore
    from .fakes.device import MemoryMixer
    from .fakes.search import StaticSearch
    from .plugins import PluginPorts, default_registry
    from .session.boundary import SessionBoundary

    ports = PluginPorts(session=SessionBoundary(), mixer=MemoryMixer(), calendar=MemoryCalendarStore(),
                        search=StaticSearch(), signals=None, volume_step=settings.volume.step)
    return default_registry(ports)


def cmd_events_list(args: argparse.Namespace) -> int:
    settings = _settings_for(args)
    registry = _offline_registry(settings)
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
        for row in rows:
            print(f"{row['name']:<28} {row['tool_name']:<22} {row['result_policy']:<20} {row['description']}")
    return 0


def cmd_events_resolve(args: argparse.Namespace) -> int:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from .events import ResolveContext, resolve_deterministic

    settings = _settings_for(args)
    registry = _offline_registry(settings)
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
                             locale="zh" if any("\u4e00" <= c <= "\u9fff" for c in args.text or "") else "en")
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


# -- chat --------------------------------------------------------------------------------------------


def cmd_chat(args: argparse.Namespace) -> int:
    from .console import run_chat

    settings = _settings_for(args)
    return asyncio.run(run_chat(settings, json_lines=args.json))


def cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .demo import DEFAULT_SCRIPT, run_demo

    settings = _settings_for(args)
    script = tuple(args.say) if args.say else DEFAULT_SCRIPT
    return asyncio.run(run_demo(settings, Path(args.out), script=script, json_lines=args.json))


def cmd_devices(args: argparse.Namespace) -> int:
    try:
        from .adapters.sounddevice_io import list_devices

        devices = list_devices()
    except (ImportError, OSError) as exc:
        raise CliError(f"audio devices unavailable: {exc}") from None
    if args.json:
        print(json.dumps([d.__dict__ if hasattr(d, "__dict__") else d._asdict() for d in devices], indent=2))
        return 0
    if not devices:
        print("no audio devices found")
    for d in devices:
        print(f"{d.index:>3}  {d.name:<40} in={d.max_input_channels} out={d.max_output_channels} "
              f"rate={d.default_samplerate:.0f}")
    return 0


# -- parser ------------------------------------------------------------------------------------------


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy-runtime", description="The runtime inside a talking toy.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    events = sub.add_parser("events", help="inspect the event registry")
    events_sub = events.add_subparsers(dest="events_command", required=True, metavar="SUBCOMMAND")
    p = events_sub.add_parser("list", help="list registered events")
    _add_config(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_events_list)
    p = events_sub.add_parser("resolve", help="run an event's deterministic resolver + validation")
    _add_config(p)
    p.add_argument("name", help="namespaced event name or provider tool name")
    p.add_argument("--text", default="", help="the user's utterance")
    p.add_argument("--args", help="proposed arguments as a JSON object")
    p.add_argument("--now", help="request time (RFC3339); default now")
    p.add_argument("--tz", help="IANA time zone of the session")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_events_resolve)

    p = sub.add_parser("chat", help="text conversation: one user turn per stdin line")
    _add_turn_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON lines (speech, event, turn)")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("demo", help="the main job on embedded defaults: scripted speech in, WAV files out")
    _add_turn_flags(p)
    p.add_argument("--out", default="demo-out", help="directory for the WAV files (default: demo-out)")
    p.add_argument("--say", action="append", metavar="TEXT", help="a child utterance (repeatable; default: a script)")
    p.add_argument("--json", action="store_true", help="print one JSON line per turn")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("devices", help="list audio devices (index, name, channels, default rate)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_devices)

    for extra in _extra_commands(command) + _EXTRA_COMMANDS:
        extra(sub)
    return parser


_EXTRA_MODULES = {
    "schedules": "toy_runtime.schedules_cli",
    "run": "toy_runtime.voice_cli",
    "ptt": "toy_runtime.voice_cli",
    "doctor": "toy_runtime.doctor",
    "report": "toy_runtime.metrics.report",
    "bench": "toy_runtime.bench.cli",
}


def _extra_commands(command: str | None = None) -> list:
    """Subcommands that live in their own modules. Only the one being run is imported (start-up time matters on a
    Pi: `run` is the service); `--help` and unknown commands import them all."""
    modules = [_EXTRA_MODULES[command]] if command in _EXTRA_MODULES else list(dict.fromkeys(_EXTRA_MODULES.values()))
    commands = []
    for module, name in ((m, "register") for m in modules):
        try:
            commands.append(getattr(__import__(module, fromlist=[name]), name))
        except ImportError:
            continue
    return commands


_EXTRA_COMMANDS: list = []


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    # library warnings go to the audit log / journald via the long-running commands' own logging setup, not as
    # stray lines around a one-line error; `run` configures real logging.
    logging.getLogger().addHandler(logging.NullHandler())
    process_marks().mark("main")
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list[0] if args_list and not args_list[0].startswith("-") else None)
    args = parser.parse_args(args_list)
    try:
        return args.func(args)
    except (ConfigError, CliError, StartError) as exc:
        print(f"toy-runtime: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
