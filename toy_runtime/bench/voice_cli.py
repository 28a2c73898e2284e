"""`toy-runtime bench voice`: voice-to-voice latency of the real `toy-runtime run` process, heard from outside.

Needs PulseAudio (a private headless daemon is started) and the piper voice. Writes voice.json and voice.md to --out
and prints the Markdown. See docs/benchmarks.md ("Voice-to-voice, heard from outside") for the method.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def add_voice_parser(bench_sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `voice` command parser."""
    p = bench_sub.add_parser(
        "voice", help="heard voice-to-voice latency of `toy-runtime run` on the virtual sound card, with breakdown",
        description="Play utterances into the virtual mic, record mic feed and speaker on one clock, and measure "
                    "reply onset − end of speech per turn, broken down against the runtime's own waterfall.")
    p.add_argument("--turns", type=int, default=12, help="spoken turns (default 12)")
    p.add_argument("--ttft-ms", type=float, default=0.0, help="scripted LLM time to first token (default 0)")
    p.add_argument("--hangover-ms", type=int, default=None,
                   help="VAD hangover given to the runtime (default: the runtime's own, [vad] hangover_ms)")
    p.add_argument("--events", choices=["on", "off"], default="on", help="events enabled (default on)")
    p.add_argument("--end-by", choices=["level", "vad"], default="level",
                   help="the runtime's end of speech: the last loud speech frame (default) or the VAD's last speech "
                        "frame (vad.end_by_level)")
    p.add_argument("--threshold-db", type=float, default=-50.0,
                   help="RMS level (dBFS, 10 ms windows) that counts as sound (default -50)")
    p.add_argument("--session", choices=["plain", "mixed", "pauses"], default="plain",
                   help="plain: every turn a short answer (default); mixed: web searches (on a SearxNG-like server "
                        "on loopback) and reminders between plain answers, for memory during use; pauses: the pause "
                        "corpus in --language (utterances with pauses of 300-1,200 ms, and complete commands): "
                        "cuts and heard v2v per class (--turns 30 plays each once)")
    p.add_argument("--whole-sentences", action="store_true",
                   help="with --session pauses: each paused utterance voiced as one sentence and cut at its pauses")
    p.add_argument("--language", choices=["en", "zh"], default="en",
                   help="the child's language: zh = Mandarin questions in the neural Mandarin voice and Mandarin "
                        "answers (needs scripts/make_mandarin_voice.sh)")
    p.add_argument("--python", default=None, metavar="PATH",
                   help="interpreter for the runtime under test (default: this one), e.g. a virtualenv with only the "
                        "core dependencies: the optional aiohttp (web console) is imported by the openai SDK when "
                        "installed and adds ~9 MB")
    p.add_argument("--env", action="append", default=[], metavar="TOY_KEY=VALUE",
                   help="extra setting for the runtime under test, e.g. TOY_AUDIO__CAPTURE_BLOCK_FRAMES=1 or "
                        "MALLOC_MMAP_THRESHOLD_=131072 (repeatable)")
    p.add_argument("--malloc", choices=["unit", "glibc", "jemalloc"], default="unit",
                   help="the runtime's allocator: unit = as the systemd unit runs it (jemalloc when libjemalloc2 is "
                        "installed, else glibc's with a note; default), or one of the two")
    p.add_argument("--alsa", choices=["toy", "machine"], default="toy",
                   help="the runtime's ALSA configuration: toy = this machine's with the drop-in the toy's install "
                        "adds (configs/alsa/, keeps a codec plugin's 13.6 MB out; default), machine = as found here")
    p.add_argument("--out", default="bench-out/voice",
                   help="directory for voice.json, voice.md and the runtime's state (runtime-*/audit.jsonl, stderr)")
    p.add_argument("--quiet", action="store_true", help="do not print the report")
    p.set_defaults(func=cmd_bench_voice)
    return p


def cmd_bench_voice(args: argparse.Namespace) -> int:
    """Run the bench, write the report, print it (exit 1 when no turn could be measured)."""
    from ..service.heap import jemalloc_installed
    from ..testing.alsa import override_installed, repo_override
    from ..testing.pulse import pulseaudio_available
    from .voice_report import write_voice_report
    from .voice_run import VoiceBenchConfig, run_voice_bench

    if args.turns < 1:
        print("toy-runtime: --turns must be at least 1", file=sys.stderr)
        return 2
    if not pulseaudio_available():
        print("toy-runtime: bench voice needs pulseaudio and pulseaudio-utils", file=sys.stderr)
        return 2
    extra = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith(("TOY_", "MALLOC_")):
            print(f"toy-runtime: --env wants TOY_KEY=VALUE (or a glibc MALLOC_ setting), got {item!r}",
                  file=sys.stderr)
            return 2
        extra[key] = value
    malloc = args.malloc
    if malloc == "unit":
        malloc = "jemalloc" if jemalloc_installed() else "glibc"
        if malloc == "glibc":
            print("toy-runtime: libjemalloc2 is not installed: the runtime runs on glibc's malloc, not as the "
                  "systemd unit runs it (more memory while speaking)", file=sys.stderr)
    elif malloc == "jemalloc" and not jemalloc_installed():
        print("toy-runtime: --malloc jemalloc needs libjemalloc2 (apt-get install libjemalloc2)", file=sys.stderr)
        return 2
    alsa = args.alsa
    if alsa == "toy" and not override_installed() and repo_override() is None:
        alsa = "machine"
        print("toy-runtime: the toy's ALSA drop-in (configs/alsa/) is neither installed nor in a checkout here: the "
              "runtime runs on this machine's ALSA (up to 13.6 MB more memory)", file=sys.stderr)
    from .voice_run import PHRASES, PHRASES_ZH, REPLY_TEXT, REPLY_TEXT_ZH

    chinese = args.language == "zh"
    from .voice_run import VAD_HANGOVER_MS

    config = VoiceBenchConfig(turns=args.turns, ttft_ms=args.ttft_ms,
                              hangover_ms=VAD_HANGOVER_MS if args.hangover_ms is None else args.hangover_ms,
                              phrases=PHRASES_ZH if chinese else PHRASES,
                              reply_text=REPLY_TEXT_ZH if chinese else REPLY_TEXT,
                              events=args.events == "on", end_by_level=args.end_by == "level",
                              threshold_db=args.threshold_db, extra_env=extra, session=args.session, python=args.python,
                              malloc=malloc, alsa=alsa, pause_language=args.language,
                              whole_sentences=args.whole_sentences,
                              state_dir=Path(args.out) / time.strftime("runtime-%Y%m%d-%H%M%S"))
    summary = run_voice_bench(config, progress=lambda msg: print(f"bench voice: {msg}", file=sys.stderr, flush=True))
    paths = write_voice_report(Path(args.out), summary)
    if not args.quiet:
        print(paths["markdown"].read_text())
    print(f"report: {paths['markdown']}  json: {paths['json']}", file=sys.stderr)
    return 0 if summary["turns_measured"] else 1
