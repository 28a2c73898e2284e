"""Voice-to-voice latency on the virtual sound card, split by stage.

Runs `toy-runtime run` as a real process on a headless PulseAudio card, plays piper speech into its mic, answers
through the scripted OpenAI-compatible server, and reads the `voice.turn` audit records:
end of speech → endpoint (hangover) → ASR final → first token → first clause synthesized → first audio written.

Conditions (one run each): scripted LLM at zero TTFT with events enabled, the same with all events disabled
(first-audio ratio), and a realistic TTFT. Also start-up time (process start → READY) and the process RSS.

    python scripts/bench_voice.py [--turns 6] [--ttft-ms 350]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toy_runtime.adapters.piper_tts import PiperSynthesizer
from toy_runtime.testing.pulse import VirtualSoundCard
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records

PHRASES = ["what is the weather today", "play some music", "tell me a story", "what time is it",
           "how are you today", "can you sing a song"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_condition(card, synth, *, ttft_s: float, events: bool, turns: int) -> dict:
    reply = Reply(text="Sure! Here is a short answer for you." + ("<agent_events>device.volume.adjust</agent_events>"
                                                                   if events else ""), delay_s=ttft_s)
    tmp = Path(tempfile.mkdtemp(prefix="bench-voice-"))
    with ScriptedLLMServer(lambda request: reply) as llm:
        env = dict(os.environ)
        env.update(card.runtime_env)
        env.update({"TOY_STATE_DIR": str(tmp), "TOY_AUDIO__INPUT_DEVICE": "pulse", "TOY_AUDIO__OUTPUT_DEVICE": "pulse",
                    "TOY_LLM__BASE_URL": llm.url, "TOY_LLM__MODEL": "scripted", "TOY_VAD__HANGOVER_MS": "200"})
        if not events:
            env["TOY_EVENTS__ENABLED"] = "[]"
        audit = tmp / "audit.jsonl"
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            # steady state: the voice and the LLM SDK load after READY (runtime.warm); start-up has its own bench
            while not audit_records(audit, "runtime.warm"):
                if time.monotonic() - started > 90 or proc.poll() is not None:
                    raise RuntimeError("runtime did not finish loading")
                time.sleep(0.05)
            loaded_s = time.monotonic() - started
            rss_loaded = rss_mb(proc.pid)
            time.sleep(1.0)
            for phrase in PHRASES[:turns]:
                pieces = synth.synthesize_blocking(phrase)
                pcm = b"".join(p.pcm for p in pieces)
                before = len(audit_records(audit, "voice.turn"))
                card.play_to_mic(pcm, pieces[0].sample_rate_hz, pad_ms=100)
                deadline = time.monotonic() + 30
                while len(audit_records(audit, "voice.turn")) == before and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(0.5)
            rss_after = rss_mb(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
    turns_done = audit_records(audit, "voice.turn")
    return {"loaded_s": loaded_s, "rss_loaded_mb": rss_loaded, "rss_after_mb": rss_after, "turns": turns_done}


def med(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 1) if values else None


def summarize(label: str, result: dict) -> dict:
    turns = result["turns"]
    w = [t["waterfall_ms"] for t in turns]
    row = {
        "condition": label,
        "turns": len(turns),
        "heard": [t["text"] for t in turns],
        "endpoint_ms": med([x["endpoint"] for x in w]),
        "asr_final_ms": med([x["asr_final"] for x in w]),
        "first_token_ms": med([x["first_token"] for x in w]),
        "first_clause_synth_ms": med([x["first_clause_synthesized"] for x in w]),
        "first_audio_ms": med([x["first_audio"] for x in w]),
        "tts_first_clause_ms": med([t["first_clause_tts_ms"] for t in turns]),
        "provider_ttft_ms": med([t["provider_ttft_ms"] for t in turns]),
        "runtime_added_ms": med([t["runtime_added_ms"] for t in turns]),
        "loaded_s": round(result["loaded_s"], 2),
        "rss_loaded_mb": round(result["rss_loaded_mb"]),
        "rss_after_mb": round(result["rss_after_mb"]),
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--ttft-ms", type=float, default=350.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    synth = PiperSynthesizer(deterministic=True)
    rows = []
    with VirtualSoundCard() as card:
        for label, ttft, events in (("zero TTFT, events on", 0.0, True), ("zero TTFT, events off", 0.0, False),
                                    (f"TTFT {args.ttft_ms:.0f} ms, events on", args.ttft_ms / 1000, True)):
            rows.append(summarize(label, run_condition(card, synth, ttft_s=ttft, events=events, turns=args.turns)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    keys = ["condition", "turns", "endpoint_ms", "asr_final_ms", "first_token_ms", "first_clause_synth_ms",
            "first_audio_ms", "tts_first_clause_ms", "runtime_added_ms", "loaded_s", "rss_loaded_mb", "rss_after_mb"]
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")
    on, off = rows[0]["first_audio_ms"], rows[1]["first_audio_ms"]
    if on and off:
        print(f"\nfirst audio, events on / events off: {on / off:.2f}")
    for row in rows:
        print(f"{row['condition']}: heard {row['heard']}")


if __name__ == "__main__":
    main()
