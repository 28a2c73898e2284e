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
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a Unix filter killed by a closed pipe reports


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class _HelpFormatter(argparse.HelpFormatter):
    """Help columns wide enough for every command name, and words never split at a hyphen ("start-\nup")."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("max_help_position", 30)
        super().__init__(prog, **kwargs)

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        # argparse measures subcommand names without their extra indent, so a long one ("schedules") was pushed
        # onto a line of its own with its help below it
        subactions = getattr(action, "_get_subactions", lambda: [])()
        if action.help is not argparse.SUPPRESS and subactions:
            longest = max(len(self._format_action_invocation(a)) for a in subactions)
            self._action_max_length = max(self._action_max_length,
                                          longest + self._current_indent + self._indent_increment)

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose subcommand parsers (made with type(self)) share the help formatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML profile loaded on top of the defaults")


def _add_turn_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every command that runs turns (chat, demo, run, ptt)."""
    _add_config(parser)
    parser.add_argument("--mode", choices=["dual_agent", "chat_agent_tools"], help="tool invocation mode")
    parser.add_argument("--llm-base-url", metavar="URL", help="OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--llm-model", metavar="MODEL", help="model name sent to the endpoint ([llm] model)")
    parser.add_argument("--volume-backend", choices=["memory", "alsa"],
                        help="where volume changes go: memory (no hardware) or the ALSA mixer")
    parser.add_argument("--mqtt-url", metavar="URL", help="firmware broker: mqtt://HOST:PORT or mqtts://HOST:PORT")
    parser.add_argument("--device-id", metavar="ID", help="this toy's id in the MQTT topics ([mqtt] device_id)")
    parser.add_argument("--web", metavar="HOST:PORT", help="serve the live debug console there (docs/console.md)")


def _settings_for(args: argparse.Namespace) -> Settings:
    """The settings for a command: TOML + environment + flags, then every load-time check (preflight)."""
    settings = _load_with_flags(args)
    from .preflight import check_settings

    check_settings(settings)
    return settings


def _load_with_flags(args: argparse.Namespace) -> Settings:
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
    from .language import guess_locale

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


# -- chat --------------------------------------------------------------------------------------------


def cmd_chat(args: argparse.Namespace) -> int:
    from .console import run_chat

    settings = _settings_for(args)
    return asyncio.run(run_chat(settings, json_lines=args.json))


def cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .demo import DEFAULT_SCRIPT, run_demo

    from .preflight import check_output_dir

    settings = _settings_for(args)
    check_output_dir(Path(args.out), "--out")
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
    if not devices:
        print("toy-runtime: no audio devices found; `toy-runtime doctor` says why (is PulseAudio/PipeWire running, "
              "is the user in the `audio` group, is the card plugged in?)", file=sys.stderr)
        return 1
    if args.json:
        return 0
    for d in devices:
        print(f"{d.index:>3}  {d.name:<40} in={d.max_input_channels} out={d.max_output_channels} "
              f"rate={d.default_samplerate:.0f}")
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    settings = _settings_for(args)
    source = f"profile {args.config} + environment" if args.config else "defaults + environment (no --config)"
    print(f"config OK ({source}); state_dir {settings.state_dir}, "
          f"LLM {'at ' + settings.llm.base_url if settings.llm_online else 'offline'}")
    return 0


# -- parser ------------------------------------------------------------------------------------------


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(prog="toy-runtime", description="The runtime inside a talking toy.",
                     epilog="Every command takes --help. A user error ends with one line on stderr and exit code 2.")
    parser.add_argument("--version", action="version", version=f"toy-runtime {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    events = sub.add_parser("events", help="inspect the event registry")
    events_sub = events.add_subparsers(dest="events_command", required=True, metavar="SUBCOMMAND")
    p = events_sub.add_parser("list", help="list registered events")
    _add_config(p)
    p.add_argument("--json", action="store_true", help="print the definitions as a JSON list (with schemas)")
    p.set_defaults(func=cmd_events_list)
    p = events_sub.add_parser("resolve", help="run an event's deterministic resolver + validation")
    _add_config(p)
    p.add_argument("name", help="namespaced event name or provider tool name")
    p.add_argument("--text", default="", help="the user's utterance")
    p.add_argument("--args", help="proposed arguments as a JSON object")
    p.add_argument("--now", help="request time (RFC3339); default now")
    p.add_argument("--tz", help="IANA time zone of the session")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=cmd_events_resolve)

    p = sub.add_parser("chat", help="text conversation: one user turn per stdin line")
    _add_turn_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON lines (speech, event, turn)")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("demo", help="the main job on embedded defaults: scripted speech in, WAV files out")
    _add_turn_flags(p)
    p.add_argument("--out", metavar="DIR", default="demo-out", help="folder for the WAV files (default: demo-out)")
    p.add_argument("--say", action="append", metavar="TEXT", help="a child utterance (repeatable; default: a script)")
    p.add_argument("--json", action="store_true",
                   help="stdout has only JSON lines (turns, verdicts, summary); progress goes to stderr")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("devices", help="list audio devices (index, name, channels, default rate)",
                       description="Exit code 1 when no device is found (then `toy-runtime doctor` says why).")
    p.add_argument("--json", action="store_true", help="print a JSON list of devices")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("config", help="check the configuration without starting anything")
    config_sub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    p = config_sub.add_parser("check", help="load the profile + TOY_* environment and run every load-time check",
                              description="Exit code 0 when the settings are usable, else one line naming the key "
                              "and exit code 2. Audio devices are checked by `run`/`ptt` and `doctor`.")
    _add_turn_flags(p)
    p.set_defaults(func=cmd_config_check)

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


_BUILTIN_COMMANDS = {"events", "chat", "demo", "devices", "config"}  # defined in build_parser itself


def _extra_commands(command: str | None = None) -> list:
    """Subcommands that live in their own modules. Only the one being run is imported (start-up time matters on a
    Pi: `run` is the service); `--help` and unknown commands import them all."""
    if command in _BUILTIN_COMMANDS:
        return []
    modules = [_EXTRA_MODULES[command]] if command in _EXTRA_MODULES else list(dict.fromkeys(_EXTRA_MODULES.values()))
    commands = []
    for module, name in ((m, "register") for m in modules):
        try:
            commands.append(getattr(__import__(module, fromlist=[name]), name))
        except ImportError:
            continue
    return commands


_EXTRA_COMMANDS: list = []


# the settings key behind a device or model error code, so the one line says what to change
_KEY_FOR_CODE = {"tts-model-missing": "tts.voice_path", "tts-model-failed": "tts.voice_path",
                 "asr-model-missing": "asr.model_path", "asr-model-failed": "asr.model_path"}


def _expected_error(exc: BaseException) -> str | None:
    """The one line for a device or model that is missing or failed (the user's to fix), else None (a bug)."""
    for module, name, default_key in (("toy_runtime.ports.audio", "AudioDeviceError", "audio"),
                                      ("toy_runtime.ports.speech", "SpeechEngineError", "speech")):
        cls = getattr(sys.modules.get(module), name, None)  # only loaded if the command used it
        if cls is not None and isinstance(exc, cls):
            return f"{_KEY_FOR_CODE.get(getattr(exc, 'code', ''), default_key)}: {exc}"
    return None


def _stdout_closed() -> int:
    """The reader of stdout went away (`| head`): exit quietly like any Unix filter."""
    import os

    # nothing more can be written; point stdout at /dev/null so the interpreter's final flush cannot complain
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    from .logs import configure_logging, user_error_line

    # library warnings (e.g. the MQTT link) reach stderr in every command; `run`/`ptt` raise the level to log_level
    configure_logging("warning")
    process_marks().mark("main")
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list[0] if args_list and not args_list[0].startswith("-") else None)
    args = parser.parse_args(args_list)
    try:
        code = args.func(args)
        sys.stdout.flush()  # inside the try: a reader that left (`| head`) is noticed here, not at interpreter exit
        return code
    except (ConfigError, CliError, StartError) as exc:
        print(user_error_line(str(exc)), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        line = _expected_error(exc)
        if line is None:
            raise  # a bug: the traceback is what a report needs
        print(user_error_line(line), file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
