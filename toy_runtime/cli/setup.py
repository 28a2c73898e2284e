"""`toy-runtime devices` (list the audio devices) and `toy-runtime config check` (settings without starting)."""

from __future__ import annotations

import argparse
import json
import sys

from .common import CliError, add_turn_flags, settings_for


def cmd_devices(args: argparse.Namespace) -> int:
    """Print the audio devices; exit 1 when there are none."""
    try:
        from ..app.engines import list_devices

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
    """Load the settings and run every load-time check; one line either way (and a warning for a nearly full disk)."""
    from ..app.preflight import low_space_warnings

    settings = settings_for(args)
    for line in low_space_warnings(settings):
        print(f"warning: {line}", file=sys.stderr)
    source = f"profile {args.config} + environment" if args.config else "defaults + environment (no --config)"
    print(f"config OK ({source}); state_dir {settings.state_dir}, time zone {settings.session.timezone}, "
          f"LLM {f'at {settings.llm.base_url}' if settings.llm.base_url else 'offline'}")  # = llm_online
    return 0


def register_devices(sub) -> None:
    """Add `devices`."""
    p = sub.add_parser("devices", help="list audio devices (index, name, channels, default rate)",
                       description="Exit code 1 when no device is found (then `toy-runtime doctor` says why).")
    p.add_argument("--json", action="store_true", help="print a JSON list of devices")
    p.set_defaults(func=cmd_devices)


def register_config(sub) -> None:
    """Add `config check`."""
    p = sub.add_parser("config", help="check the configuration without starting anything")
    config_sub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    p = config_sub.add_parser("check", help="load the profile + TOY_* environment and run every load-time check",
                              description="Exit code 0 when the settings are usable, else one line naming the key "
                              "and exit code 2. Audio devices are checked by `run`/`ptt` and `doctor`.")
    add_turn_flags(p)
    p.set_defaults(func=cmd_config_check)
