"""`toy-runtime report [AUDIT.jsonl] [--out report.html|report.png]`: per-turn latency waterfall from the audit log.

Without a file it reads the configured audit log (`[audit] path`, default `<state_dir>/audit.jsonl`; `--config` as
for the other commands). The file's rotated backups (`AUDIT.jsonl.N` … `.1`) are read first, oldest first.
Reads the JSONL audit log (one object per line with "kind" and "ts") and takes two kinds of records:

- `voice.turn` (a spoken turn): milestones in ms after the end of the child's speech — endpoint, ASR final, first
  token, first speakable text, first clause synthesized, first audio — plus the second answer's first audio and
  each event's completion (`event:<name>`), and voice-to-voice / runtime-added / provider TTFT / first-clause TTS.
- `turn.completed` (any turn; for text-only turns the only record): milestones in ms after the turn started —
  first token (first_answer.ttft_ms), first speech, second answer, total — and each event's own latency.

A spoken turn writes both records (turn.completed first): the turn.completed written since the previous voice.turn
is folded into the voice turn (matched by `turn_id` instead when the voice record carries one), so every turn is
shown once. `turn.started` records give text turns their utterance.

The picture (matplotlib, Agg) has one horizontal bar per turn: coloured segments between successive milestones
(what each stage cost), ▲ where the second answer started, ◆ where an event finished (spoken turns) or a thin
hatched bar as long as the event took (text turns: the event's start is not recorded). `--out x.html` writes one
self-contained file with the picture embedded (base64) and a table with one row per turn.

The console summary prints one line per turn, then n / median / p90 of voice-to-voice, runtime-added, TTFT,
first-clause TTS (and first speech / total for text turns).

Exit codes: 0 report written / printed; 1 the log holds no turn records (nothing to report: a message says so, no
file is written); 2 usage errors — the audit file is missing or unreadable, `--out` is not .png/.html, or
matplotlib is missing for a picture. Malformed lines (not JSON, not an object, a turn record of the wrong shape)
are skipped and counted, never fatal.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from .turns import AuditScan, Turn, clock_text, events_text, load_audit, short_text, summary_stats
from .waterfall import render_html, render_png

__all__ = ["EXIT_NO_TURNS", "EXIT_OK", "EXIT_USAGE", "register", "run_report", "summary_lines", "turn_line"]

EXIT_OK, EXIT_NO_TURNS, EXIT_USAGE = 0, 1, 2


# -- console ---------------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} ms"


def turn_line(turn: Turn) -> str:
    """One readable console line for a turn."""
    head = f"{turn.kind:<5} {turn.label:<5} {clock_text(turn.ts)}"
    if turn.kind == "voice":
        fields = [f"voice-to-voice {_ms(turn.voice_to_voice_ms)}", f"runtime {_ms(turn.runtime_added_ms)}",
                  f"TTFT {_ms(turn.ttft_ms)}", f"TTS {_ms(turn.first_clause_tts_ms)}"]
        if turn.second_answer_ms is not None:
            fields.append(f"second answer {_ms(turn.second_answer_ms)}")
    else:
        fields = [f"TTFT {_ms(turn.ttft_ms)}", f"first speech {_ms(turn.first_speech_ms)}"]
        if turn.second_answer_ms is not None:
            fields.append(f"second answer {_ms(turn.second_answer_ms)}")
        fields.append(f"total {_ms(turn.total_ms)}")
    if turn.path:
        fields.append(f"path {turn.path}" + (f" (fault {turn.fault})" if turn.fault else ""))
    if turn.events:
        fields.append(f"events: {events_text(turn)}")
    flags = [f for f, on in (("terminated", turn.terminated), ("interrupted", turn.interrupted)) if on]
    if flags:
        fields.append(", ".join(flags))
    text = f'  "{short_text(turn.text)}"' if turn.text else ""
    return f"{head}  " + " · ".join(fields) + text


def summary_lines(scan: AuditScan) -> list[str]:
    """The console summary: a line per turn, then n / median / p90 per metric."""
    voice = sum(1 for t in scan.turns if t.kind == "voice")
    lines = [turn_line(t) for t in scan.turns]
    skipped = f"; {scan.malformed} malformed line(s) skipped" if scan.malformed else ""
    lines.append("")
    lines.append(f"{len(scan.turns)} turn(s) ({voice} spoken, {len(scan.turns) - voice} text) from "
                 f"{scan.source or 'the audit log'}{skipped}")
    lines.append(f"{'':<20} {'n':>4} {'median':>10} {'p90':>10}")
    for title, row in summary_stats(scan.turns).items():
        if row["n"]:
            lines.append(f"{title:<20} {row['n']:>4} {_ms(row['median']):>10} {_ms(row['p90']):>10}")
        else:
            lines.append(f"{title:<20} {0:>4} {'–':>10} {'–':>10}")
    return lines


# -- the command -----------------------------------------------------------------------------------------


def run_report(audit: str | Path, *, out: str | Path | None = None, last: int | None = None,
               stream: TextIO | None = None, err: TextIO | None = None) -> int:
    """Read `audit`, print the summary to `stream`, write `out` (.png or .html) if given; returns the exit code."""
    stream = stream if stream is not None else sys.stdout
    err = err if err is not None else sys.stderr
    out_path = Path(out) if out else None
    if out_path is not None and out_path.suffix.lower() not in (".png", ".html", ".htm"):
        print(f"toy-runtime: --out {out_path}: must end in .png or .html", file=err)
        return EXIT_USAGE
    try:
        scan = load_audit(audit)
    except FileNotFoundError:
        print(f"toy-runtime: audit log not found: {audit}", file=err)
        return EXIT_USAGE
    except OSError as exc:
        print(f"toy-runtime: cannot read audit log {audit}: {exc.strerror or exc}", file=err)
        return EXIT_USAGE
    if last is not None and last > 0:
        scan.turns = scan.turns[-last:]
    if not scan.turns:
        skipped = f", {scan.malformed} malformed" if scan.malformed else ""
        print(f"no turns in {audit} ({scan.lines} line(s){skipped}): no voice.turn or turn.completed records; "
              "nothing to report", file=stream)
        return EXIT_NO_TURNS
    for line in summary_lines(scan):
        print(line, file=stream)
    if out_path is None:
        return EXIT_OK
    try:
        png = render_png(scan.turns, title=f"per-turn latency · {Path(audit).name}")
    except ImportError as exc:
        print(f"toy-runtime: {exc}", file=err)
        return EXIT_USAGE
    data = png if out_path.suffix.lower() == ".png" else render_html(scan, png).encode("utf-8")
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_bytes(data)
    except OSError as exc:
        print(f"toy-runtime: cannot write {out_path}: {exc.strerror or exc}", file=err)
        return EXIT_USAGE
    print(f"wrote {out_path}", file=stream)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    audit = args.audit
    if audit is None:
        from toy_runtime.config import load_settings

        audit = load_settings(args.config).audit_path  # ConfigError: one line, exit 2 (cli.main)
    return run_report(audit, out=args.out, last=args.last)


def register(subparsers: Any) -> None:
    """Add `toy-runtime report` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "report", help="per-turn latency waterfall from an audit log (PNG or HTML) and a console summary",
        description="Exit codes: 0 ok, 1 no turn records in the log, 2 missing file / bad --out / no matplotlib.")
    p.add_argument("audit", metavar="AUDIT.jsonl", nargs="?",
                   help="the audit log (default: the configured one, [audit] path or <state_dir>/audit.jsonl)")
    p.add_argument("--config", metavar="FILE", help="TOML profile that says where the audit log is")
    p.add_argument("--out", metavar="FILE", help="report.png (the picture) or report.html (picture + table)")
    p.add_argument("--last", type=int, metavar="N", help="only the latest N turns")
    p.set_defaults(func=cmd_report)
