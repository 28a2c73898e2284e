#!/usr/bin/env python
"""Benchmark `toy-runtime run` as the service starts it: time to READY and resident memory (not a test).

    python scripts/bench_startup.py [--runs 5] [--settle 1.0] [--no-compile] [--json]

Starts the real command on the virtual sound card (headless PulseAudio, as in the tests) `--runs` times offline
(embedded defaults) and `--runs` times with an LLM endpoint configured (a scripted server on loopback: the openai SDK
is loaded), after one discarded cold start that builds the recognizer's dictionary cache in the shared state
directory, as the first start on a toy does once. For each start it reads the `runtime.ready` and `runtime.warm`
audit records (milliseconds since the kernel created the process, with the marks in between) and the process's
VmRSS `--settle` seconds after everything is loaded.

The package's bytecode is compiled first (`compileall`), as `pip install` does on the toy; with `--no-compile`
and PYTHONDONTWRITEBYTECODE set, every start also compiles ~120 modules (about +0.3 s here).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toy_runtime.testing.pulse import VirtualSoundCard  # noqa: E402
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer  # noqa: E402
from toy_runtime.testing.services import audit_records, end_process  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def start_once(card: VirtualSoundCard, state: Path, extra_env: dict[str, str], settle_s: float) -> dict:
    """One `toy-runtime run`: READY/warm marks and RSS once loaded; the process is stopped with SIGTERM."""
    run_dir = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    audit = run_dir / "audit.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
    env.update(card.runtime_env)
    env.update({"TOY_STATE_DIR": str(state), "TOY_AUDIT__PATH": str(audit),
                "TOY_CALENDAR__PATH": str(run_dir / "calendar.sqlite3"), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                "TOY_AUDIO__OUTPUT_DEVICE": "pulse", "MALLOC_ARENA_MAX": "2"})  # as the systemd unit sets it
    env.update(extra_env)
    proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (warm := audit_records(audit, "runtime.warm")):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"run did not finish loading: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.02)
        time.sleep(settle_s)
        marks = warm[0]["marks"]
        return {"ready_ms": marks["ready"], "voice_ms": marks["voice"], "warm_ms": marks["warm"],
                "rss_mb": round(rss_mb(proc.pid), 1), "marks": marks}
    finally:
        end_process(proc)


def summary(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs]
    return f"{statistics.median(values):7.0f} (min {min(values):.0f}, max {max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=1.0, help="seconds after runtime.warm before reading RSS")
    parser.add_argument("--no-compile", action="store_true", help="do not byte-compile the package first")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    if not args.no_compile:
        for package in ("toy_runtime", "firmware_bridge"):
            compileall.compile_dir(str(ROOT / package), quiet=1)
    results: dict = {"runs": args.runs, "compiled": not args.no_compile}
    with VirtualSoundCard() as card, ScriptedLLMServer(lambda request: Reply(text="Hi!")) as llm, \
            tempfile.TemporaryDirectory(prefix="bench-state-") as state:
        cold = start_once(card, Path(state), {}, args.settle)
        results["cold_start_ready_ms"] = cold["ready_ms"]
        for label, extra in (("offline", {}), ("llm_endpoint", {"TOY_LLM__BASE_URL": llm.url})):
            results[label] = [start_once(card, Path(state), extra, args.settle) for _ in range(args.runs)]

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"`toy-runtime run` on the virtual card, {args.runs} starts each "
          f"({'bytecode compiled' if results['compiled'] else 'bytecode as found'}); ms since process creation")
    print(f"first start ever (builds the dictionary cache): READY at {cold['ready_ms']:.0f} ms")
    print(f"{'':14} {'READY (listening)':>28} {'voice loaded':>28} {'all loaded':>28} {'RSS MB':>26}")
    for label in ("offline", "llm_endpoint"):
        runs = results[label]
        print(f"{label:14} {summary(runs, 'ready_ms'):>28} {summary(runs, 'voice_ms'):>28} "
              f"{summary(runs, 'warm_ms'):>28} {summary(runs, 'rss_mb'):>26}")
    marks = results["offline"][len(results["offline"]) // 2]["marks"]
    print("marks of one offline start:", ", ".join(f"{k} {v:.0f}" for k, v in marks.items()))


if __name__ == "__main__":
    main()
