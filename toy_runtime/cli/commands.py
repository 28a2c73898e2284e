"""The `toy-runtime` command line: the command table, the parser, and one line for every error the user can fix.

Each command's module is imported only when that command runs (start-up time matters on a Pi: `run` is the service);
`--help` and unknown commands import them all. A command whose module cannot be imported is one line naming the
module and exit 1 (the installation is broken, not the command line), never a vanished command ("invalid choice").
"""

from __future__ import annotations

import sys
from typing import NoReturn, Sequence

from ..service.startup import process_marks

process_marks().mark("interpreter")  # before the config's pydantic import: what Python itself took

from ..config import ConfigError  # noqa: E402 - timed after the mark
from ..errors import CliError, StartError, ToyError  # noqa: E402
from .common import Parser  # noqa: E402

EXIT_USAGE = 2
EXIT_BROKEN = 1  # a command's module cannot be imported: a broken installation, not a usage error
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a Unix filter killed by a closed pipe reports

# name -> (module, register function), in the order `--help` lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "events": ("toy_runtime.cli.events", "register"),
    "chat": ("toy_runtime.cli.turns", "register_chat"),
    "demo": ("toy_runtime.cli.turns", "register_demo"),
    "devices": ("toy_runtime.cli.setup", "register_devices"),
    "config": ("toy_runtime.cli.setup", "register_config"),
    "schedules": ("toy_runtime.cli.schedules", "register"),
    "run": ("toy_runtime.cli.voice", "register_run"),
    "ptt": ("toy_runtime.cli.voice", "register_ptt"),
    "doctor": ("toy_runtime.doctor", "register"),
    "report": ("toy_runtime.metrics.report", "register"),
    "bench": ("toy_runtime.bench.cli", "register"),
}


class CommandUnavailable(ToyError):
    """The module behind a command cannot be imported (a missing dependency or a broken install)."""

    code = "command_unavailable"


def _register(name: str, sub) -> None:
    """Add one command's parser, importing its module now; CommandUnavailable names the module when that fails."""
    import importlib

    module, function = COMMANDS[name]
    try:
        register = getattr(importlib.import_module(module), function)
    except ImportError as exc:
        raise CommandUnavailable(f"command {name!r} is unavailable: cannot import {module} ({exc})") from exc
    register(sub)


def _unavailable(exc: CommandUnavailable):
    def run(args) -> int:
        raise exc

    return run


def build_parser(command: str | None = None) -> Parser:
    """The parser with `command`'s parser only when it is known, else with every command (for help and errors).

    Raises CommandUnavailable when the named command's module cannot be imported; in the full listing such a
    command stays visible, its help saying why it cannot run."""
    from .. import __version__

    parser = Parser(prog="toy-runtime", description="The runtime inside a talking toy.",
                    epilog="Every command takes --help. A user error ends with one line on stderr and exit code 2.")
    parser.add_argument("--version", action="version", version=f"toy-runtime {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command in COMMANDS:
        _register(command, sub)
        return parser
    for name in COMMANDS:
        try:
            _register(name, sub)
        except CommandUnavailable as exc:
            sub.add_parser(name, help=f"(unavailable: {exc.__cause__})").set_defaults(func=_unavailable(exc))
    return parser


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
    """Parse `argv` (default: sys.argv), run the command, and return its exit code."""
    from ..service.logs import configure_logging, user_error_line

    # library warnings (e.g. the MQTT link) reach stderr in every command; `run`/`ptt` raise the level to log_level
    configure_logging("warning")
    process_marks().mark("main")
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(args_list[0] if args_list and not args_list[0].startswith("-") else None)
    except CommandUnavailable as exc:
        print(user_error_line(str(exc)), file=sys.stderr)
        return EXIT_BROKEN
    args = parser.parse_args(args_list)
    try:
        code = args.func(args)
        sys.stdout.flush()  # inside the try: a reader that left (`| head`) is noticed here, not at interpreter exit
        return code
    except CommandUnavailable as exc:
        print(user_error_line(str(exc)), file=sys.stderr)
        return EXIT_BROKEN
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


def entry() -> NoReturn:
    """The `toy-runtime` executable and `python -m toy_runtime`: `main()`, then end the process with its code (as
    service/process_exit.py says, without the interpreter's finalization once a native runtime is loaded)."""
    from ..service.process_exit import exit_process

    exit_process(main())


if __name__ == "__main__":
    entry()
