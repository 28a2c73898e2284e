"""`toy-runtime run` (always listening) and `toy-runtime ptt` (keyboard push-to-talk): flags only; the voice
application is `toy_runtime.app.voice_app`."""

from __future__ import annotations

import argparse

from .common import add_turn_flags, settings_for

_TRANSCRIPT_HELP = ("live transcript on stdout: states, what was heard and said, events, latency "
                    "(default: on a terminal, off under systemd)")


def cmd_run(args: argparse.Namespace) -> int:
    """The always-listening voice loop."""
    from ..app.voice_app import serve

    return serve(settings_for(args), once=args.once, transcript=args.transcript)


def cmd_ptt(args: argparse.Namespace) -> int:
    """The voice loop with keyboard push-to-talk."""
    from ..app.voice_app import serve

    return serve(settings_for(args), keyboard=True, transcript=args.transcript)


def register_run(sub) -> None:
    """Add `run`."""
    p = sub.add_parser("run", help="always-listening voice loop on the configured audio devices")
    add_turn_flags(p)
    p.add_argument("--once", action="store_true", help="exit after the first audio session closes")
    p.add_argument("--transcript", action=argparse.BooleanOptionalAction, default=None, help=_TRANSCRIPT_HELP)
    p.set_defaults(func=cmd_run)


def register_ptt(sub) -> None:
    """Add `ptt`."""
    p = sub.add_parser("ptt", help="push-to-talk on a laptop: hold space (or Enter to start and stop) to talk")
    add_turn_flags(p)
    p.add_argument("--transcript", action=argparse.BooleanOptionalAction, default=None, help=_TRANSCRIPT_HELP)
    p.set_defaults(func=cmd_ptt)
