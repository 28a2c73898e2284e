#!/usr/bin/env python
"""Benchmark `toy-runtime run` as the service starts it: time to READY and resident memory (not a test).

    python scripts/bench_startup.py [--runs 5] [--settle 1.0] [--no-compile] [--json]
    python scripts/bench_startup.py --idle-seconds 30 [--runs 5] [--offline-only] [--set KEY=VALUE ...]

Starts the real command on the virtual sound card (headless PulseAudio, as in the tests) `--runs` times offline
(embedded defaults) and `--runs` times with an LLM endpoint configured (a scripted server on loopback: the openai SDK
is loaded), after one discarded cold start that builds the recognizer's dictionary cache in the shared state
directory, as the first start on a toy does once. For each start it reads the `runtime.ready` and `runtime.warm`
audit records (milliseconds since the kernel created the process, with the marks in between) and the process's
VmRSS `--settle` seconds after everything is loaded. Every start runs as the toy runs it: with the systemd unit's
allocator settings (jemalloc when libjemalloc2 is installed) and the ALSA drop-in the toy's install adds
(configs/alsa/, through ALSA_CONFIG_PATH when this machine lacks it).

With `--idle-seconds S`, each start is then left listening to silence for S seconds and its CPU time over them
is read from `/proc` (user + system, every thread): idle CPU in % of one core, in total and per thread. Threads
are named from a `py-spy dump` when py-spy is installed (Python threads by name; PortAudio's callback threads show
the callback they run), else by their kernel name. `--set KEY=VALUE` adds an environment variable to every start
(e.g. `--set TOY_AUDIO__CAPTURE_BLOCK_FRAMES=1`); to compare two settings, run the script for each, alternating.

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
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toy_runtime.service.heap import JEMALLOC_ENV, jemalloc_installed  # noqa: E402
from toy_runtime.testing.alsa import override_installed, toy_alsa_config  # noqa: E402
from toy_runtime.testing.pulse import VirtualSoundCard  # noqa: E402
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer  # noqa: E402
from toy_runtime.testing.services import audit_records, end_process  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def thread_ticks(pid: int) -> dict[int, tuple[str, int]]:
    """Every thread of `pid`: tid → (kernel name, user + system CPU ticks so far)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(task.name)] = (name, int(fields[11]) + int(fields[12]))  # utime, stime (fields 14, 15 of stat)
    return out


def thread_labels(pid: int) -> dict[int, str]:
    """tid → a readable label from `py-spy dump` (a Python thread's name, or the innermost function a foreign
    thread such as PortAudio's runs Python in); empty without py-spy."""
    if shutil.which("py-spy") is None:
        return {}
    dump = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30).stdout
    labels: dict[int, str] = {}
    tid = None
    for line in dump.splitlines():
        if line.startswith("Thread "):
            tid = int(line.split()[1], 0)
            labels[tid] = line.split(": ", 1)[1].strip('"') if ": " in line else ""
        elif tid is not None and line.startswith("    ") and labels[tid].startswith("Dummy"):
            labels[tid] = line.split()[0]  # a foreign thread: its innermost Python function (one line)
            tid = None
    if pid in labels:
        labels[pid] = "event loop (main thread)"
    return labels


def idle_cpu(pid: int, seconds: float) -> dict:
    """CPU of `pid` over `seconds` of listening to silence: total and per thread, in % of one core."""
    before = thread_ticks(pid)
    t0 = time.monotonic()
    time.sleep(seconds)
    after = thread_ticks(pid)
    elapsed = time.monotonic() - t0
    labels = thread_labels(pid)
    per_thread = {}
    for tid, (name, ticks) in after.items():
        used = ticks - before.get(tid, (name, 0))[1]
        if used:
            label = f"{labels.get(tid) or name} [{tid}]"
            per_thread[label] = round(100.0 * used / CLOCK_TICKS / elapsed, 2)
    total = sum(per_thread.values())
    return {"idle_cpu_pct": round(total, 2),
            "idle_threads": dict(sorted(per_thread.items(), key=lambda kv: -kv[1]))}


def start_once(card: VirtualSoundCard, state: Path, extra_env: dict[str, str], settle_s: float,
               idle_s: float = 0.0) -> dict:
    """One `toy-runtime run`: READY/warm marks and RSS once loaded (and its idle CPU over `idle_s` seconds after
    that); the process is stopped with SIGTERM."""
    run_dir = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    audit = run_dir / "audit.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
    env.update(card.runtime_env)
    env.update({"TOY_STATE_DIR": str(state), "TOY_AUDIT__PATH": str(audit),
                "TOY_CALENDAR__PATH": str(run_dir / "calendar.sqlite3"), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                "TOY_AUDIO__OUTPUT_DEVICE": "pulse", "MALLOC_ARENA_MAX": "2"})  # as the systemd unit sets it
    if jemalloc_installed():
        env.update(JEMALLOC_ENV)  # the unit's allocator
    if not override_installed():
        env["ALSA_CONFIG_PATH"] = str(toy_alsa_config(run_dir))  # the toy's ALSA, as install-pi.sh leaves it
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
        result = {"ready_ms": marks["ready"], "voice_ms": marks["voice"], "warm_ms": marks["warm"],
                  "rss_mb": round(rss_mb(proc.pid), 1), "marks": marks}
        if idle_s > 0:
            result.update(idle_cpu(proc.pid, idle_s))
        return result
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
    parser.add_argument("--idle-seconds", type=float, default=0.0,
                        help="then listen to silence this long and report the process's CPU (0: skip)")
    parser.add_argument("--offline-only", action="store_true", help="skip the starts with an LLM endpoint")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for every start (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.set)

    if not args.no_compile:
        for package in ("toy_runtime", "firmware_bridge"):
            compileall.compile_dir(str(ROOT / package), quiet=1)
    results: dict = {"runs": args.runs, "compiled": not args.no_compile}
    with VirtualSoundCard() as card, ScriptedLLMServer(lambda request: Reply(text="Hi!")) as llm, \
            tempfile.TemporaryDirectory(prefix="bench-state-") as state:
        cold = start_once(card, Path(state), extra, args.settle)
        results["cold_start_ready_ms"] = cold["ready_ms"]
        kinds = [("offline", {})] + ([] if args.offline_only else [("llm_endpoint", {"TOY_LLM__BASE_URL": llm.url})])
        for label, kind_env in kinds:
            results[label] = [start_once(card, Path(state), {**extra, **kind_env}, args.settle, args.idle_seconds)
                              for _ in range(args.runs)]

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"`toy-runtime run` on the virtual card, {args.runs} starts each "
          f"({'bytecode compiled' if results['compiled'] else 'bytecode as found'}); ms since process creation")
    print(f"first start ever (builds the dictionary cache): READY at {cold['ready_ms']:.0f} ms")
    print(f"{'':14} {'READY (listening)':>28} {'voice loaded':>28} {'all loaded':>28} {'RSS MB':>26}")
    labels = [label for label in ("offline", "llm_endpoint") if label in results]
    for label in labels:
        runs = results[label]
        print(f"{label:14} {summary(runs, 'ready_ms'):>28} {summary(runs, 'voice_ms'):>28} "
              f"{summary(runs, 'warm_ms'):>28} {summary(runs, 'rss_mb'):>26}")
    if args.idle_seconds > 0:
        print(f"idle CPU over {args.idle_seconds:.0f} s of silence, % of one core"
              f"{' (' + ', '.join(args.set) + ')' if args.set else ''}:")
        for label in labels:
            runs = results[label]
            values = [r["idle_cpu_pct"] for r in runs]
            print(f"  {label:12} {', '.join(f'{v:.2f}' for v in values)}  median "
                  f"{statistics.median(values):.2f}")
        middle = sorted(results["offline"], key=lambda r: r["idle_cpu_pct"])[len(results["offline"]) // 2]
        print("  per thread (the median offline start):",
              "; ".join(f"{name} {pct:.2f}" for name, pct in middle["idle_threads"].items()))
    marks = results["offline"][len(results["offline"]) // 2]["marks"]
    print("marks of one offline start:", ", ".join(f"{k} {v:.0f}" for k, v in marks.items()))


if __name__ == "__main__":
    main()
