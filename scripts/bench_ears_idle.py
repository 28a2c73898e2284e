#!/usr/bin/env python3
"""What the capture front end costs a listening toy: `toy-runtime run` on the virtual card, idle, with `[ears]` off
and on (before any session, and after one, when the speaker's stream stays open for the canceller), interleaved.

    python scripts/bench_ears_idle.py [--seconds 20] [--rounds 2]

Reports the process's CPU (utime + stime from /proc, % of one core) over `--seconds` of silence and its RSS (MB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(card, condition: str, seconds: float) -> dict:
    from toy_runtime.adapters.piper_tts import PiperSynthesizer
    from toy_runtime.testing.services import audit_records, child_env, wait_for

    with tempfile.TemporaryDirectory() as state:
        env = child_env()
        env.update(card.runtime_env)
        env.update({"TOY_STATE_DIR": state, "TOY_AUDIO__INPUT_DEVICE": "pulse", "TOY_AUDIO__OUTPUT_DEVICE": "pulse",
                    "TOY_SESSION__IDLE_TIMEOUT_S": "1"})
        if condition == "off":
            env.update({"TOY_EARS__ECHO_CANCELLATION": "false", "TOY_EARS__NOISE_SUPPRESSION": "false"})
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        audit = Path(state) / "audit.jsonl"
        try:
            wait_for(lambda: audit_records(audit, "runtime.warm"), 90, "the runtime to load", proc)
            if condition == "on, after a session":
                voice = PiperSynthesizer(deterministic=True)
                pcm = b"".join(p.pcm for p in voice.synthesize_blocking("hello there"))
                card.play_to_mic(pcm, voice.sample_rate_hz, pad_ms=200)
                wait_for(lambda: audit_records(audit, "voice.session_closed"), 60, "the session to close", proc)
            time.sleep(2.0)
            start_cpu, start = cpu_s(proc.pid), time.monotonic()
            time.sleep(seconds)
            used = cpu_s(proc.pid) - start_cpu
            return {"condition": condition, "cpu_pct_of_core": round(100 * used / (time.monotonic() - start), 2),
                    "rss_mb": round(rss_mb(proc.pid), 1)}
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    from toy_runtime.testing.pulse import VirtualSoundCard

    rows = []
    with VirtualSoundCard() as card:
        for _ in range(args.rounds):
            for condition in ("off", "on, before any session", "on, after a session"):
                rows.append(measure(card, condition, args.seconds))
                print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
