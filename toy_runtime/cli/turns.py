"""`toy-runtime chat` (text turns from stdin) and `toy-runtime demo` (scripted speech in, WAV files out)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from .common import add_turn_flags, settings_for


def cmd_chat(args: argparse.Namespace) -> int:
    """One user turn per stdin line."""
    from ..app.chat import run_chat

    settings = settings_for(args)
    return asyncio.run(run_chat(settings, json_lines=args.json))


def cmd_demo(args: argparse.Namespace) -> int:
    """The scripted demo on embedded defaults."""
    from ..app.demo import run_demo
    from ..app.demo_script import SCRIPTS
    from ..app.preflight import check_output_dir

    settings = settings_for(args)
    check_output_dir(Path(args.out), "--out")
    script = tuple(args.say) if args.say else SCRIPTS[args.story]
    return asyncio.run(run_demo(settings, Path(args.out), script=script, json_lines=args.json))


def register_chat(sub) -> None:
    """Add `chat`."""
    p = sub.add_parser("chat", help="text conversation: one user turn per stdin line")
    add_turn_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON lines (speech, event, turn)")
    p.set_defaults(func=cmd_chat)


def register_demo(sub) -> None:
    """Add `demo`."""
    p = sub.add_parser("demo", help="the main job on embedded defaults: scripted speech in, WAV files out")
    add_turn_flags(p)
    p.add_argument("--out", metavar="DIR", default="demo-out", help="folder for the WAV files (default: demo-out)")
    p.add_argument("--say", action="append", metavar="TEXT", help="a child utterance (repeatable; default: a script)")
    p.add_argument("--story", choices=("en", "zh"), default="en",
                   help="the scripted story: en = English, zh = Mandarin (volume, a reminder, goodbye; best with the "
                   "neural Mandarin voice: scripts/make_mandarin_voice.sh)")
    p.add_argument("--json", action="store_true",
                   help="stdout has only JSON lines (turns, verdicts, summary); progress goes to stderr")
    p.set_defaults(func=cmd_demo)
