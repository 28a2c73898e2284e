#!/usr/bin/env python3
"""The wake word, measured (not a test: nothing here asserts): misses, false wakes, CPU and latency.

    python scripts/bench_wake_word.py [--model okay_nabu] [--cutoff 0.85] [--minutes 30] [--front-end]
                                      [--out bench-out/wake_word.json]

Misses: the model's phrase, spelled the way a person writes it ("okay nabu", "ok nabu", "okay, nabu" for okay_nabu),
in six espeak-ng voices at three speeds and in the toy's piper voice (joe) at three speaking rates: 63 phrases in
7 voices, their speech set to -24 dBFS, each clean and over white noise, pink noise and babble (six espeak sentences
at once), the noise 20 and 10 dB below the speech (`--snr`), at fixed seeds. Each phrase is fed after 1.5 s of its
noise and followed by 1 s, to a detector reset before it (as listening starts).
False wakes: English speech (sentences built from word lists, read by six espeak voices and piper joe), Chinese
speech (espeak-ng `cmn` in three voices reading sentences built from Chinese word lists) and music-like audio
(numpy chords, melodies and a drum-ish pulse). About 20 minutes of distinct material is synthesized; it is cut into
4-12 s pieces that are shuffled, each at a random level (speech at -38..-20 dBFS), with pauses between, to
`--minutes` (30) in all, under a faint pink-noise floor (-62 dBFS). The detector hears each category as one
stream, never reset. Near-misses ("okay now", "okay, no"...) are said alone and reported apart.
CPU: `time.process_time()` spent inside `process()` over the audio's duration (% of one core); per frame, each
call's CPU time (`thread_time`) and wall time. Latency: from the end of the phrase's speech (its last sample above
300, i.e. -41 dBFS: espeak's clips end in ~0.3 s of silence) to the end of the 20 ms frame on which it fired.
Everything is fed in 20 ms frames, as the microphone delivers them; `--front-end` first passes all audio through
the runtime's WebRTC noise suppression (as `run` does with `[ears] noise_suppression`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RATE = 16000
FRAME = 320  # samples: the microphone's 20 ms frame
SPEECH_DBFS = -24.0  # every clip's speech is set to this RMS level first (a near voice; no clipping under noise)
LEAD_S, TAIL_S = 1.5, 1.0  # around each phrase: the noise alone, then after it
LATE_S = 0.75  # a detection later than this after the phrase's speech is not a detection of it

ESPEAK_VOICES = ("en-us", "en-us+m3", "en-us+f2", "en+f3", "en-gb", "en-us+m7")
ESPEAK_SPEEDS = (140, 175, 210)  # words per minute; espeak's default is 175
PIPER_LENGTH_SCALES = (0.85, 1.0, 1.2)  # joe faster, as is, slower
PHRASINGS = {"okay_nabu": ("okay nabu", "ok nabu", "okay, nabu"),
             "hey_jarvis": ("hey jarvis", "hey, jarvis", "hey jarvis!"),
             "hey_mycroft": ("hey mycroft", "hey, mycroft", "hey mycroft!"),
             "alexa": ("alexa", "alexa!", "alexa,")}
# near the phrase in sound, said alone: reported apart from the false wakes per hour
CONFUSABLES = {"okay_nabu": ("okay now", "okay, no", "okay nana", "a banana", "okay, my boo", "no, Nabil"),
               "hey_jarvis": ("hey jars", "hey Travis", "hey Jarvie", "a service"),
               "hey_mycroft": ("hey Microsoft", "hey my cross", "hey Minecraft", "my craft"),
               "alexa": ("Alex", "Alexis", "a lexer", "Electra")}

EN_WORDS = {
    "start": ["", "", "", "okay, ", "so ", "now ", "oh, ", "well, ", "hey, ", "and then "],
    "who": ["the little fox", "my teacher", "a big brown bear", "my sister", "the robot", "our neighbour",
            "a tiny mouse", "the pilot", "my best friend", "the old king", "a purple dragon", "the baker"],
    "did": ["found", "painted", "carried", "forgot", "cooked", "dropped", "wanted", "counted", "built", "borrowed",
            "washed", "hid"],
    "what": ["a yellow balloon", "seven shiny stones", "the birthday cake", "a broken umbrella", "some noodles",
             "the map of the island", "a banana", "three paper boats", "the blue bicycle", "a bucket of sand"],
    "when": ["yesterday", "after school", "on sunday morning", "before dinner", "in the rain", "at the zoo",
             "last summer", "right now", "every night", "near the river"],
}
ZH_WORDS = {
    "who": ["小猫", "我的妈妈", "老师", "小熊", "哥哥", "一只小鸟", "机器人", "我们班的同学", "爷爷", "小兔子"],
    "when": ["今天", "明天早上", "昨天晚上", "周末", "下课以后", "吃饭的时候", "天黑以前", "下雨的时候"],
    "did": ["去公园玩", "吃了一个苹果", "画了一幅画", "唱了一首歌", "看了一本书", "找到了一块石头", "做了蛋糕",
            "讲了一个故事", "把音量调小", "学会了游泳"],
    "tail": ["。", "吗？", "，真好玩。", "，然后回家了。", "，大家都很高兴。"],
}


# --- synthesis ------------------------------------------------------------------------------------------------------


def espeak(text: str, voice: str, speed: int = 175) -> np.ndarray:
    """`text` in espeak-ng's `voice` at `speed` words per minute, 16 kHz int16 (deterministic)."""
    from toy_runtime.testing.speech import espeak_pcm

    return np.frombuffer(espeak_pcm(text, voice, speed=speed, sample_rate_hz=RATE), np.int16)


def piper_voices():
    """(length scale, PhraseCache) for joe at each speaking rate, deterministic; each loads in about a second."""
    from toy_runtime.adapters.piper_tts import PiperSynthesizer
    from toy_runtime.testing.speech import PhraseCache

    for scale in PIPER_LENGTH_SCALES:
        synth = PiperSynthesizer(deterministic=True, length_scale=scale)
        try:
            yield scale, PhraseCache(synth)
        finally:
            synth.close()


def piper(cache, text: str) -> np.ndarray:
    return np.frombuffer(cache.speak_at(text, RATE), np.int16)


def english_sentences(n: int, rng: np.random.Generator) -> list[str]:
    w = EN_WORDS
    return [f"{rng.choice(w['start'])}{rng.choice(w['who'])} {rng.choice(w['did'])} {rng.choice(w['what'])} "
            f"{rng.choice(w['when'])}." for _ in range(n)]


def chinese_sentences(n: int, rng: np.random.Generator) -> list[str]:
    w = ZH_WORDS
    return [f"{rng.choice(w['who'])}{rng.choice(w['when'])}{rng.choice(w['did'])}{rng.choice(w['tail'])}"
            for _ in range(n)]


def music(seconds: float, seed: int) -> np.ndarray:
    """Music-like audio: a chord progression (three notes with harmonics, decaying), a pentatonic melody over it and
    a low pulse, at 100-140 beats per minute."""
    rng = np.random.default_rng(seed)
    beat = 60.0 / rng.uniform(100, 140)
    n = int(seconds * RATE)
    x = np.zeros(n)

    def note(hz: float, length: float, level: float, decay: float) -> np.ndarray:
        t = np.arange(int(length * RATE)) / RATE
        tone = sum(np.sin(2 * np.pi * hz * k * t) / k**1.5 for k in (1, 2, 3, 4))
        return level * tone * np.minimum(1, t / 0.01) * np.exp(-decay * t)

    root = 110.0 * 2 ** (rng.integers(0, 12) / 12)
    chords = [(0, 4, 7), (5, 9, 12), (7, 11, 14), (-3, 0, 4)]  # I IV V vi (semitones over the root)
    scale = np.array([0, 2, 4, 7, 9, 12, 14, 16])
    at = 0.0
    while at < seconds:
        start = int(at * RATE)
        for semis in chords[rng.integers(len(chords))]:
            piece = note(root * 2 ** (semis / 12), 4 * beat, 0.25, 1.2)[: n - start]
            x[start : start + len(piece)] += piece
        for step in range(8):  # eighth notes of melody, some rests
            if rng.random() < 0.75:
                s = int((at + step * beat / 2) * RATE)
                if s < n:
                    piece = note(root * 4 * 2 ** (rng.choice(scale) / 12), beat / 2, 0.35, 4.0)[: n - s]
                    x[s : s + len(piece)] += piece
        for step in range(4):  # a low thump on each beat
            s = int((at + step * beat) * RATE)
            if s < n:
                piece = note(55.0, 0.15, 0.6, 25.0)[: n - s]
                x[s : s + len(piece)] += piece
        at += 4 * beat
    return (x / np.max(np.abs(x)) * 12000).astype(np.int16)


def white(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.normal(0, 1, n)


def pink(n: int, rng: np.random.Generator) -> np.ndarray:
    """1/f noise: white noise shaped in the frequency domain (power falling 3 dB an octave)."""
    spectrum = np.fft.rfft(rng.normal(0, 1, n))
    f = np.fft.rfftfreq(n, 1 / RATE)
    spectrum /= np.sqrt(np.maximum(f, 20.0))
    return np.fft.irfft(spectrum, n)


def speech_rms(clip: np.ndarray) -> float:
    """RMS over the clip's speech (samples in 10 ms blocks above -50 dBFS), not its silences."""
    blocks = clip[: len(clip) // 160 * 160].astype(np.float64).reshape(-1, 160)
    power = np.mean(blocks**2, axis=1)
    return float(np.sqrt(np.mean(power[power > 100.0**2]))) if np.any(power > 100.0**2) else 1.0


def speech_span(clip: np.ndarray, threshold: int = 300) -> tuple[int, int]:
    loud = np.nonzero(np.abs(clip) > threshold)[0]
    return int(loud[0]), int(loud[-1]) + 1


def at_level(clip: np.ndarray, dbfs: float = SPEECH_DBFS) -> np.ndarray:
    """The clip (float) with its speech at `dbfs` RMS."""
    return clip.astype(np.float64) * (32768 * 10 ** (dbfs / 20) / speech_rms(clip))


def to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


# --- running the detector -------------------------------------------------------------------------------------------


class Meter:
    """Feeds a detector 20 ms at a time and keeps its CPU time, each call's CPU and wall time, the audio's length."""

    def __init__(self, front_end: bool) -> None:
        self.cpu_s = 0.0
        self.audio_s = 0.0
        self.calls_cpu_ns: list[int] = []  # this thread's CPU time in each call: what the call costs
        self.calls_wall_ns: list[int] = []  # includes time the OS gave other processes: a loaded machine shows here
        self.front_end = front_end

    def clean(self, audio: np.ndarray) -> np.ndarray:
        """Audio through the runtime's noise suppression (10 ms frames, no echo reference), as `run` hears it."""
        if not self.front_end:
            return audio
        from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

        apm, pcm, silence = WebRtcAudioProcessor(RATE, echo_cancellation=False), audio.tobytes(), bytes(320)
        return np.frombuffer(b"".join(apm.process(pcm[i : i + 320], silence)
                                      for i in range(0, len(pcm) - 319, 320)), np.int16)

    def feed(self, detector, audio: np.ndarray) -> list[int]:
        """The sample at the end of each frame on which the detector fired."""
        pcm = self.clean(audio).tobytes()
        hits, cpu_ns, wall_ns = [], self.calls_cpu_ns, self.calls_wall_ns
        cpu0 = time.process_time()
        for i in range(0, len(pcm), 2 * FRAME):
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            fired = detector.process(pcm[i : i + 2 * FRAME])
            cpu_ns.append(time.thread_time_ns() - c0)
            wall_ns.append(time.perf_counter_ns() - t0)
            if fired:
                hits.append(min(i + 2 * FRAME, len(pcm)) // 2)
        self.cpu_s += time.process_time() - cpu0
        self.audio_s += len(pcm) / 2 / RATE
        return hits


# --- the bench ------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="okay_nabu",
                        help="a builtin model (okay_nabu, hey_jarvis, hey_mycroft, alexa) or a microWakeWord JSON "
                             "config; a JSON model needs --phrase")
    parser.add_argument("--phrase", action="append", help="how its phrase is written (repeat for more spellings)")
    parser.add_argument("--cutoff", type=float, default=None, help="probability cutoff (default: the model's)")
    parser.add_argument("--minutes", type=float, default=30.0, help="other audio for false wakes (default 30)")
    parser.add_argument("--front-end", action="store_true",
                        help="hear everything through the runtime's noise suppression first, as `run` does")
    parser.add_argument("--snr", default="20,10", help="noise levels under the phrases, dB below their speech "
                        "(comma-separated; default 20,10)")
    parser.add_argument("--no-pitch-view", dest="pitch_view", action="store_false",
                        help="the model alone, without its lower-pitched view (audio/wake_views.py)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="bench-out/wake_word.json", help="where to write the JSON results")
    args = parser.parse_args(argv)
    snrs = [float(v) for v in args.snr.split(",") if v.strip()]
    if shutil.which("espeak-ng") is None:
        print("bench_wake_word needs espeak-ng (apt install espeak-ng)", file=sys.stderr)
        return 2

    from toy_runtime.app.ears import wake_detector
    from toy_runtime.config import ConfigError, load_settings, with_updates

    phrasings = tuple(args.phrase or PHRASINGS.get(args.model, ()))
    if not phrasings:
        parser.error(f"--phrase: how is {args.model!r}'s phrase written?")
    try:
        # built as `run` builds it: the model at its cutoff, and its lower-pitched view unless --no-pitch-view
        settings = with_updates(load_settings(None, env={}), ears={
            "wake_word_model": args.model, "wake_word_cutoff": args.cutoff, "wake_word_pitch_view": args.pitch_view})
        detector = wake_detector(settings)
    except (ValueError, ConfigError) as exc:
        parser.error(str(exc))
    meter = Meter(args.front_end)
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2)  # espeak-ng runs in child processes

    # what gets synthesized: the phrases, the babble, the other speech
    espeak_jobs = {(text, voice, speed): pool.submit(espeak, text, voice, speed)
                   for text in phrasings for voice in ESPEAK_VOICES for speed in ESPEAK_SPEEDS}
    babble_lines = english_sentences(6, np.random.default_rng(args.seed + 1))
    babble_jobs = [pool.submit(espeak, line, voice) for line, voice in zip(babble_lines, ESPEAK_VOICES)]
    confusable_jobs = {(text, voice): pool.submit(espeak, text, voice)
                       for text in CONFUSABLES.get(args.model, ()) for voice in ESPEAK_VOICES}
    english = english_sentences(150, rng)
    en_jobs = [pool.submit(espeak, " ".join(english[i * 25 : (i + 1) * 25]), voice)
               for i, voice in enumerate(ESPEAK_VOICES)]
    chinese = chinese_sentences(90, rng)
    zh_jobs = [pool.submit(espeak, "".join(chinese[i * 30 : (i + 1) * 30]), voice)
               for i, voice in enumerate(("cmn", "cmn+f2", "cmn+m3"))]

    # (voice, how fast, text, clip)
    phrases: list[tuple[str, str, str, np.ndarray]] = [(f"espeak {voice}", f"{speed} wpm", text, job.result())
                                                       for (text, voice, speed), job in espeak_jobs.items()]
    piper_english: list[np.ndarray] = []
    piper_lines = english_sentences(30, np.random.default_rng(args.seed + 2))
    confusables = [(f"espeak {voice}", text, job.result()) for (text, voice), job in confusable_jobs.items()]
    for scale, cache in piper_voices():
        phrases += [("piper joe", f"x{scale}", text, piper(cache, text)) for text in phrasings]
        confusables += [(f"piper joe x{scale}", text, piper(cache, text)) for text in CONFUSABLES.get(args.model, ())]
        if scale == 1.0:
            piper_english = [piper(cache, " ".join(piper_lines[i : i + 5])) for i in range(0, len(piper_lines), 5)]

    babble_clips = [job.result().astype(np.float64) for job in babble_jobs]
    synthesized_s = time.perf_counter() - started

    # misses: each phrase clean and over three noises
    n_noise = int(30 * RATE)
    noise_rng = np.random.default_rng(args.seed + 3)
    babble = np.zeros(n_noise)
    for i, clip in enumerate(babble_clips):  # six voices at once, each looped, each starting elsewhere
        babble += np.roll(np.resize(clip / (speech_rms(clip.astype(np.int16)) + 1e-9), n_noise), i * 7919)
    beds = {"white": white(n_noise, noise_rng), "pink": pink(n_noise, noise_rng), "babble": babble}
    noises = {"clean": (None, 0.0)} | {f"{kind} {snr:g} dB": (bed, snr) for snr in snrs for kind, bed in beds.items()}
    trials, latencies_ms = [], []
    for voice, pace, text, clip in phrases:
        speech_start, speech_end = speech_span(clip)
        lead, tail = int(LEAD_S * RATE), int(TAIL_S * RATE)
        level = at_level(clip)
        for condition, (noise, snr) in noises.items():
            audio = np.zeros(lead + len(clip) + tail)
            audio[lead : lead + len(clip)] = level
            if noise is not None:
                offset = int(noise_rng.integers(0, n_noise - len(audio)))
                bed = noise[offset : offset + len(audio)]
                audio += bed / np.sqrt(np.mean(bed**2)) * 32768 * 10 ** ((SPEECH_DBFS - snr) / 20)
            detector.reset()  # as the capture path does when listening starts
            hits = meter.feed(detector, to_int16(audio))
            end = lead + speech_end
            good = [h for h in hits if lead + speech_start <= h <= end + LATE_S * RATE]
            if good:
                latencies_ms.append((good[0] - end) * 1000 / RATE)
            trials.append({"voice": voice, "pace": pace, "text": text, "noise": condition, "woke": bool(good),
                           "extra_wakes": len(hits) - min(1, len(good)),
                           "latency_ms": round((good[0] - end) * 1000 / RATE, 1) if good else None})

    # confusables: said alone, with silence around, clean
    confusable_wakes = []
    for voice, text, clip in confusables:
        detector.reset()
        if meter.feed(detector, to_int16(np.concatenate([np.zeros(RATE), at_level(clip), np.zeros(RATE)]))):
            confusable_wakes.append(f"{voice}: {text!r}")

    # false wakes: three long streams built from the distinct material
    en_clips = [job.result() for job in en_jobs] + piper_english
    zh_clips = [job.result() for job in zh_jobs]
    music_clips = [music(30.0, args.seed + k) for k in range(8)]
    shares = {"English speech": (en_clips, 0.4), "Chinese speech": (zh_clips, 0.3), "music-like": (music_clips, 0.3)}
    floor_rng = np.random.default_rng(args.seed + 4)
    false_wakes, distinct_s = {}, 0.0
    for category, (clips, share) in shares.items():
        distinct_s += sum(len(c) for c in clips) / RATE
        pieces = []  # 4-12 s cuts of the material, shuffled, at random gains, with pauses
        for clip in clips:
            at = 0
            while at < len(clip) - RATE:
                length = int(rng.uniform(4, 12) * RATE)
                pieces.append(clip[at : at + length])
                at += length
        target, stream, total = int(args.minutes * share * 60 * RATE), [], 0
        while total < target:
            piece = at_level(pieces[rng.integers(len(pieces))], SPEECH_DBFS + rng.uniform(-14, 4))
            gap = np.zeros(int(rng.uniform(0.2, 1.5) * RATE))
            stream += [piece, gap]
            total += len(piece) + len(gap)
        audio = np.concatenate(stream)
        audio += pink(len(audio), floor_rng) * (32768 * 10 ** (-62 / 20)) / np.sqrt(np.mean(pink(RATE, floor_rng)**2))
        detector.reset()
        hits = meter.feed(detector, to_int16(audio))
        false_wakes[category] = {"minutes": round(len(audio) / RATE / 60, 1), "false_wakes": len(hits),
                                 "at_s": [round(h / RATE, 1) for h in hits]}
    pool.shutdown()

    other_min = sum(v["minutes"] for v in false_wakes.values())
    n_false = sum(v["false_wakes"] for v in false_wakes.values())
    cpu_us, wall_us = np.array(meter.calls_cpu_ns) / 1000, np.array(meter.calls_wall_ns) / 1000
    by_noise = {c: {"phrases": sum(t["noise"] == c for t in trials),
                    "misses": sum(t["noise"] == c and not t["woke"] for t in trials)} for c in noises}
    by_voice: dict[str, dict[str, int]] = {}
    by_text: dict[str, dict[str, int]] = {}
    for t in trials:
        for groups, key in ((by_voice, t["voice"]), (by_text, t["text"])):
            v = groups.setdefault(key, {"phrases": 0, "misses": 0, "misses_clean": 0})
            v["phrases"] += 1
            v["misses"] += not t["woke"]
            v["misses_clean"] += not t["woke"] and t["noise"] == "clean"
    result = {
        "model": args.model, "wake_word": detector.name, "cutoff": detector.probability_cutoff,
        "pitch_views": list(getattr(detector, "factors", ())),
        "front_end": "WebRTC noise suppression" if args.front_end else "none",
        "phrasings": list(phrasings), "distinct_phrases": len(phrases),
        "voices": list(by_voice),
        "speech_dbfs": SPEECH_DBFS, "misses_by_noise": by_noise, "misses_by_voice": by_voice,
        "misses_by_phrasing": by_text,
        "misses_total": sum(not t["woke"] for t in trials), "trials": len(trials),
        "missed": [f"{t['voice']} {t['pace']} {t['text']!r} ({t['noise']})" for t in trials if not t["woke"]],
        "extra_wakes_around_phrases": sum(t["extra_wakes"] for t in trials),
        "latency_ms": {"n": len(latencies_ms), "p50": round(float(np.percentile(latencies_ms, 50)), 1),
                       "p90": round(float(np.percentile(latencies_ms, 90)), 1),
                       "max": round(float(np.max(latencies_ms)), 1)} if latencies_ms else None,
        "false_wakes": false_wakes, "other_audio_minutes": round(other_min, 1),
        "false_wakes_per_hour": round(n_false * 60 / other_min, 2),
        "distinct_other_material_minutes": round(distinct_s / 60, 1),
        "confusables": {"said": len(confusables), "woke": confusable_wakes},
        "cpu_pct_of_core": round(100 * meter.cpu_s / meter.audio_s, 3),
        "per_frame_cpu_us": {"mean": round(float(cpu_us.mean()), 1),
                             **{f"p{q:g}": round(float(np.percentile(cpu_us, q)), 1) for q in (99, 99.9)},
                             "max": round(float(cpu_us.max()), 1)},
        "per_frame_wall_us": {f"p{q:g}": round(float(np.percentile(wall_us, q)), 1) for q in (50, 99, 99.9)}
        | {"max": round(float(wall_us.max()), 1)},
        "audio_fed_minutes": round(meter.audio_s / 60, 1),
        "synthesis_s": round(synthesized_s, 1), "wall_s": round(time.perf_counter() - started, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False))
    print(table(result))
    print(f"\nJSON: {args.out}")
    return 0


def table(r: dict) -> str:
    """The results as a markdown table."""
    lines = [f"### Wake word {r['wake_word']!r} ({r['model']}, cutoff {r['cutoff']}, front end: {r['front_end']})",
             "", "| measure | value |", "|---|---|"]
    noise = r["misses_by_noise"]
    lines.append(f"| phrases | {r['distinct_phrases']} ({', '.join(repr(p) for p in r['phrasings'])}) in "
                 f"{len(r['voices'])} voices: {', '.join(r['voices'])} |")
    for condition, n in noise.items():
        kind, _, snr = condition.partition(" ")
        label = "clean" if condition == "clean" else f"over {kind} noise {snr} below the speech"
        lines.append(f"| misses {label} | {n['misses']} / {n['phrases']} |")
    lines.append(f"| misses, all | {r['misses_total']} / {r['trials']} "
                 f"({100 * r['misses_total'] / r['trials']:.1f} %) |")
    clean = noise["clean"]["phrases"] // max(1, len(r["misses_by_voice"]))  # clean phrases per voice
    lines.append(f"| misses by voice, clean (of {clean}) / all | " + ", ".join(
        f"{v} {n['misses_clean']} / {n['misses']}" for v, n in r["misses_by_voice"].items()) + " |")
    clean = noise["clean"]["phrases"] // max(1, len(r["misses_by_phrasing"]))
    lines.append(f"| misses by phrasing, clean (of {clean}) / all | " + ", ".join(
        f"{t!r} {n['misses_clean']} / {n['misses']}" for t, n in r["misses_by_phrasing"].items()) + " |")
    lines.append(f"| extra wakes around the phrases | {r['extra_wakes_around_phrases']} |")
    for category, f in r["false_wakes"].items():
        lines.append(f"| false wakes, {category} | {f['false_wakes']} in {f['minutes']} min |")
    lines.append(f"| false wakes, all | {sum(f['false_wakes'] for f in r['false_wakes'].values())} in "
                 f"{r['other_audio_minutes']} min ({r['false_wakes_per_hour']} per hour; "
                 f"{r['distinct_other_material_minutes']} min distinct material, reused) |")
    lines.append(f"| confusables woken on | {len(r['confusables']['woke'])} / {r['confusables']['said']}"
                 + (f": {'; '.join(r['confusables']['woke'])}" if r["confusables"]["woke"] else "") + " |")
    lat = r["latency_ms"]
    if lat:
        lines.append(f"| wake latency after the phrase's speech | p50 {lat['p50']} ms, p90 {lat['p90']} ms, "
                     f"max {lat['max']} ms (20 ms frames) |")
    f, w = r["per_frame_cpu_us"], r["per_frame_wall_us"]
    lines.append(f"| CPU | {r['cpu_pct_of_core']} % of one core |")
    lines.append(f"| CPU per 20 ms frame | mean {f['mean']} µs, p99 {f['p99']} µs, p99.9 {f['p99.9']} µs, "
                 f"max {f['max']} µs |")
    lines.append(f"| wall time per 20 ms frame | p50 {w['p50']} µs, p99 {w['p99']} µs, p99.9 {w['p99.9']} µs, "
                 f"max {w['max']} µs (includes other processes' turns) |")
    lines.append(f"| audio fed / time | {r['audio_fed_minutes']} min in {r['wall_s']} s "
                 f"({r['synthesis_s']} s of it synthesis) |")
    if r["missed"]:
        lines += ["", "missed: " + "; ".join(r["missed"])]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
