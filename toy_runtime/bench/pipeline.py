"""`toy-runtime bench pipeline`: runs the pipeline benchmarks in `scripts/` and gathers their output in one report.

Each benchmark is a script that prints its own table (they also run alone): kernel overhead, text-event parser
throughput, engines/idle CPU/RSS/start-up on the virtual sound card, the idle CPU of the whole `run` process,
voice-to-voice latency by stage, MQTT round trips. Needs the repository checkout (the scripts are not installed
with the package) and, for the audio and MQTT parts, PulseAudio and mosquitto as installed by `.ci/run`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = {
    "kernel": ["bench_kernel.py"],
    "parser": ["bench_parser.py"],
    "audio": ["bench_audio.py", "--card"],
    "startup": ["bench_startup.py", "--idle-seconds", "20"],
    "voice": ["bench_voice.py", "--turns", "6"],
    "mqtt": ["bench_mqtt.py"],
}


def scripts_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "scripts"


def run_pipeline(out: Path, parts: list[str], timeout_s: float) -> int:
    folder = scripts_dir()
    if not folder.is_dir():
        print(f"toy-runtime: bench pipeline needs the repository's scripts/ folder (not found at {folder})",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    sections, failed = [], 0
    for part in parts:
        script, *args = SCRIPTS[part]
        started = time.monotonic()
        print(f"running {part} ({script})…", file=sys.stderr, flush=True)
        try:
            proc = subprocess.run([sys.executable, str(folder / script), *args], capture_output=True, text=True,
                                  timeout=timeout_s)
            text, ok = proc.stdout.strip(), proc.returncode == 0
            if not ok:
                text += f"\n\n(exit {proc.returncode})\n{proc.stderr.strip()[-2000:]}"
        except subprocess.TimeoutExpired:
            text, ok = f"(timed out after {timeout_s:.0f} s)", False
        failed += not ok
        (out / f"{part}.txt").write_text(text + "\n")
        sections.append(f"## {part}\n\n_{script}, {time.monotonic() - started:.0f} s_\n\n```\n{text}\n```\n")
    report = out / "pipeline.md"
    report.write_text("# Pipeline benchmarks\n\n" + "\n".join(sections))
    print(report.read_text())
    return 1 if failed else 0


def add_pipeline_parser(bench_sub) -> None:
    """The `pipeline` command parser."""
    p = bench_sub.add_parser("pipeline", help="voice-to-voice, kernel, parser, idle CPU, RSS, start-up, MQTT")
    p.add_argument("--out", default="bench-out/pipeline", help="directory for pipeline.md and the raw outputs")
    p.add_argument("--only", action="append", choices=sorted(SCRIPTS), help="run only these parts (repeatable)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per part")
    p.set_defaults(func=lambda a: run_pipeline(Path(a.out), a.only or list(SCRIPTS), a.timeout))
