#!/usr/bin/env python
"""Benchmark the audio parts of the voice loop and print the figures (not a test: nothing here asserts).

    python scripts/bench_audio.py [--idle-seconds 10] [--card] [--json]

Prints: time to load the models / be ready to listen, RSS with pocketsphinx + the joe voice loaded, idle listening
CPU (VAD only, real-time paced silent source, time.process_time), ASR-final latency after the end of speech
(real-time paced piper speech through the listener), first-clause TTS time, the leading silence trimmed from piper's
audio. With --card (needs pulseaudio): the same idle figure through PortAudio on the virtual sound card with the
frames it dropped and PortAudio's input overflows meanwhile (does the capture keep up on this machine, as loaded as
it is), and the time from `play()` to the first sample written on the real sink.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

T_START = time.perf_counter()

PHRASES = ["what is the weather today", "tell me a story about a dragon", "turn the volume up", "play some music",
           "set a timer for five minutes"]
FIRST_CLAUSES = ["Sure!", "It is sunny and warm today,", "Okay, I turned the volume up.",
                 "Once upon a time, there was a little dragon,", "Good night!"]


def rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) in MB from /proc/self/status."""
    cur = peak = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            cur = int(line.split()[1]) / 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return cur, peak


def p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


async def idle_cpu(source, seconds: float, recognizer) -> float:
    """CPU % of one core spent by this process while a listener hears silence for `seconds`."""
    from toy_runtime.adapters.webrtc_vad import WebRtcVad
    from toy_runtime.audio.listener import Listener

    listener = Listener(source, WebRtcVad(2), recognizer)
    await source.start()

    async def consume() -> None:
        async for _ in listener.events():
            pass

    task = asyncio.create_task(consume(), name="bench-idle-listener")
    try:
        await asyncio.sleep(1.0)  # settle: stream start, first frames
        c0, w0 = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        return 100.0 * (time.process_time() - c0) / (time.monotonic() - w0)
    finally:
        task.cancel()
        await asyncio.wait([task])
        await source.aclose()
        await listener.aclose()


async def asr_latency(speak16k, recognizer) -> list[dict]:
    """Per phrase: ASR final after the endpoint decision, with the source paced in real time (as a mic)."""
    import numpy as np

    from toy_runtime.adapters.webrtc_vad import WebRtcVad
    from toy_runtime.audio.endpointer import EndpointerConfig
    from toy_runtime.audio.listener import Listener, Utterance
    from toy_runtime.fakes.audio import ListSource

    out = []
    for phrase in PHRASES:
        hiss = np.random.default_rng(0).normal(0, 10, 16 * 800).astype("<i2").tobytes()
        src = ListSource(hiss + speak16k(phrase) + hiss, realtime=True)
        listener = Listener(src, WebRtcVad(2), recognizer, EndpointerConfig(hangover_ms=200))
        await src.start()
        try:
            async for event in listener.events():
                if isinstance(event, Utterance):
                    out.append({"phrase": phrase, "heard": event.text, "asr_final_ms": event.asr_final_ms,
                                "delivery_ms": (event.decided_at - event.endpoint_at) * 1000,
                                "hangover_ms": event.hangover_ms})
                    break
        finally:
            await src.aclose()
            await listener.aclose()
    return out


async def first_clause_tts(synth) -> tuple[list[float], list[float]]:
    """(ms to the first piece of each clause, leading silence trimmed per piece in ms)."""
    firsts, trimmed = [], []
    for text in FIRST_CLAUSES:
        t0 = time.perf_counter()
        async for piece in synth.synthesize(text):
            firsts.append((time.perf_counter() - t0) * 1000)
            trimmed.append(piece.trimmed_ms)
            break
    return firsts, trimmed


async def card_figures(seconds: float, recognizer, speak) -> dict:
    from toy_runtime.adapters.sounddevice_io import SoundDeviceSink, SoundDeviceSource
    from toy_runtime.testing.pulse import VirtualSoundCard

    out: dict = {}
    with VirtualSoundCard() as card:
        card.apply_env()
        for block_frames in (1, 2):
            src = SoundDeviceSource("pulse", frame_ms=20, block_frames=block_frames)
            out[f"idle_cpu_pct_portaudio_block{block_frames}"] = await idle_cpu(src, seconds, recognizer)
            # whether the runtime's own capture settings (low latency, a 2 s hand-over queue) keep up on this
            # machine, as loaded as it is now: a figure here, never a test's assertion (tests/audio/test_pulse.py)
            out[f"dropped_frames_portaudio_block{block_frames}"] = src.overflows
            out[f"input_overflows_portaudio_block{block_frames}"] = src.xruns
        sink = SoundDeviceSink("pulse", sample_rate_hz=22050)
        await sink.start()
        try:
            waits = []
            audio = speak("Sure!")
            for i in range(5):
                fut = sink.first_sample(f"b{i}")
                t0 = time.monotonic()
                await sink.play(audio.pcm, audio.sample_rate_hz, f"b{i}")
                first = await fut
                waits.append((first - t0) * 1000)
                await sink.drain()
            out["play_to_first_sample_ms_p50"] = p50(waits)
            out["sink_latency_s"] = sink._stream.latency if sink._stream is not None else None
        finally:
            await sink.aclose()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--card", action="store_true", help="also measure through PortAudio on a virtual card")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from toy_runtime.audio.resample import resample
    from toy_runtime.fakes.audio import ListSource

    results: dict = {}
    rss0, _ = rss_mb()
    results["rss_mb_before_models"] = rss0

    # Ready: both engines loaded concurrently in worker threads, as the runtime does, plus the VAD.
    t0 = time.perf_counter()

    def load_sphinx():
        from toy_runtime.adapters.pocketsphinx_asr import PocketsphinxRecognizer

        t = time.perf_counter()
        rec = PocketsphinxRecognizer()
        return rec, time.perf_counter() - t

    def load_piper():
        from toy_runtime.adapters.piper_tts import PiperSynthesizer

        t = time.perf_counter()
        synth = PiperSynthesizer()
        return synth, time.perf_counter() - t

    (sphinx, t_sphinx), (synth, t_piper) = await asyncio.gather(asyncio.to_thread(load_sphinx),
                                                                asyncio.to_thread(load_piper))
    from toy_runtime.adapters.webrtc_vad import WebRtcVad

    WebRtcVad(2)
    results["load_s_pocketsphinx"] = t_sphinx
    results["load_s_piper_joe"] = t_piper
    results["ready_s_models_concurrent"] = time.perf_counter() - t0
    results["ready_s_since_process_start"] = time.perf_counter() - T_START
    results["rss_mb_models_loaded"], _ = rss_mb()

    # Warm-up synthesis (the first onnxruntime run is slower), then the figures.
    t = time.perf_counter()
    [p async for p in synth.synthesize("Hello.")]
    results["tts_first_ever_call_ms"] = (time.perf_counter() - t) * 1000

    firsts, trimmed = await first_clause_tts(synth)
    results["first_clause_tts_ms_p50"] = p50(firsts)
    results["first_clause_tts_ms_each"] = [round(x, 1) for x in firsts]
    results["leading_silence_trimmed_ms_mean"] = statistics.mean(trimmed)
    results["leading_silence_trimmed_ms_each"] = [round(x, 1) for x in trimmed]

    cache: dict[str, bytes] = {}

    def speak16k(text: str) -> bytes:
        if text not in cache:
            pieces = synth.synthesize_blocking(text)
            cache[text] = resample(b"".join(p.pcm for p in pieces), pieces[0].sample_rate_hz, 16000)
        return cache[text]

    for phrase in PHRASES:
        speak16k(phrase)
    results["rss_mb_after_use"], results["rss_mb_peak"] = rss_mb()

    lat = await asr_latency(speak16k, sphinx)
    results["asr_final_ms_p50"] = p50([x["asr_final_ms"] for x in lat])
    results["asr_final_ms_max"] = max(x["asr_final_ms"] for x in lat)
    results["endpoint_delivery_ms_p50"] = p50([x["delivery_ms"] for x in lat])
    results["asr_words_right"] = f"{sum(x['heard'] == x['phrase'] for x in lat)}/{len(lat)}"
    results["asr_each"] = [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in x.items()} for x in lat]

    silent = ListSource(bytes(32000 * int(args.idle_seconds + 3)), realtime=True)
    results["idle_cpu_pct_paced_source_vad_only"] = await idle_cpu(silent, args.idle_seconds, sphinx)

    if args.card:
        class _Speak:
            def __call__(self, text):
                pieces = synth.synthesize_blocking(text)
                from toy_runtime.ports.speech import SynthesizedAudio

                return SynthesizedAudio(b"".join(p.pcm for p in pieces), pieces[0].sample_rate_hz)

        results.update(await card_figures(args.idle_seconds, sphinx, _Speak()))
    synth.close()

    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
        return
    for key, value in results.items():
        if isinstance(value, float):
            value = round(value, 2)
        print(f"{key:40s} {value}")


if __name__ == "__main__":
    asyncio.run(main())
