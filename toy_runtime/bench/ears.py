"""`bench ears`: the capture front end on the echo rig — the toy's answers played through its speaker come back into
its one microphone (`VirtualSoundCard.add_echo_path`: a real PulseAudio loopback with a delay and attenuation),
optionally over room noise, while a child speaks over some answers and between others.

Everything runs on the virtual card through the runtime's own parts: the sounddevice microphone and speaker, the
speaker feeding `EchoReference`, `EchoCancelledSource` over the WebRTC canceller. The capture is then judged frame
by frame against the reference (what played) and the known child clips:

- echo return loss enhancement (ERLE) over echo-only stretches: all of them, the first 2 s of the first answer
  (before the filter converged), and the rest;
- false barge-ins: the runtime's VAD + endpointer (its own settings) run over the cleaned audio; a speech start
  with no child speaking is one the toy's own voice caused;
- the child's words: each child clip recognized (the runtime's recognizer, Whisper unless `--recognizer`) cut from
  what the recognizer gets (echo-cancelled, not gated) at four alignments, once spoken over an answer and once in
  silence; the same words, the same voice;
- barge-in detection: from the child's first sample to the endpointer's speech start (capture time), plus what
  one flush of the speaker costs;
- CPU: process time spent in the front end per second of audio.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["ANSWERS", "CHILD_LINES", "EarsPlan", "EarsResult", "analyse", "capture_on_rig", "plan"]

FRAME = 320  # 20 ms at 16 kHz

# The toy's answers: what it says in a conversation (its own voice, deterministic).
ANSWERS = (
    "Once upon a time, a little fox lived at the edge of a big green forest.",
    "Every morning he ran down to the river to drink and to watch the fish jump.",
    "Sure! I turned the volume down a little. Is that better?",
    "Dinosaurs lived a very long time ago, long before people.",
    "The biggest ones were as long as three buses in a row!",
    "Okay, I will remind you to brush your teeth at eight tomorrow morning.",
    "Hmm, let me think. The moon looks bright because it reflects the sun.",
    "That is a great question! Cats purr when they feel happy and safe.",
    "Let's count together: one, two, three, four, five!",
    "The turtle walked slowly, but he never stopped, and he won the race.",
)

# What the child says (a voice the toy never speaks with: espeak-ng, with a few variants).
CHILD_LINES = (
    "turn the volume down",
    "stop talking please",
    "tell me about dinosaurs",
    "I want a different story",
    "what is your name",
    "goodbye",
)
CHILD_VOICES = ("en-us", "en-us+f3", "en-us+m3")


@dataclass
class EarsPlan:
    """What plays when: `answers` answers in a row; a child clip over every `overlap_every`-th one, starting
    `overlap_at_s` into it, and one in the silence after every `silence_every`-th one."""

    answers: int = 20
    overlap_every: int = 2
    silence_every: int = 2
    overlap_at_s: float = 1.2
    delay_ms: int = 60
    gain_db: float = -6.0
    noise: str = "none"  # none | fan | babble
    barge_in: bool = True  # a speech start over an answer stops it, as in the runtime


@dataclass
class ChildClip:
    text: str
    voice: str
    pcm: bytes  # 16 kHz
    over_answer: bool
    played_at: float | None = None  # monotonic time it was handed to the card
    start_s: float | None = None  # in the capture's time (seconds from its first frame), found by correlation


@dataclass
class EarsResult:
    """The capture and what was known while making it."""

    raw: np.ndarray  # what the mic heard
    clean: np.ndarray  # what the listener got (after the residual gate)
    ref: np.ndarray  # the render frames the canceller was given
    cancelled: np.ndarray  # the canceller's output, before the gate
    clips: list[ChildClip]
    first_answer_s: float | None
    cpu_s: float
    audio_s: float
    flush_ms: list[float] = field(default_factory=list)
    stops: list[tuple[float, float]] = field(default_factory=list)  # (speech start, flush done), capture seconds
    output_latency_ms: float = 0.0
    underruns: int = 0  # the speaker's PortAudio underflows
    lead_ins: int = 0  # answers the speaker started after a lead-in of silence (SoundDeviceSink._lead_in)
    asr: np.ndarray | None = None  # what the recognizer got (AudioFrame.for_recognizer: echo-cancelled, not gated)
    underflow_gaps: int = 0  # of them, those put into the reference's timeline as silence
    own_voice_checks: list[tuple[float, float, bool]] = field(default_factory=list)
    gated_frames: int = 0
    resyncs: int = 0
    capture_gaps: int = 0  # audio lost before the canceller (device overflows, queue drops), skipped in the render
    underflow_gap_ms: list[float] = field(default_factory=list)  # each underrun's silence placed in the render
    delay_nudges: list[int] = field(default_factory=list)  # the reference moved to hold the echo's delay (samples)
    # once a second: (the frame's capture time, *EchoReference.timeline()): where render and capture stood
    reference_timeline: list[tuple[float, ...]] = field(default_factory=list)
    render_waits: int = 0  # frames that waited for the speaker to report their render, and how long in all
    render_waited_ms: float = 0.0
    recognizer_echo: str = "aec3"  # what made `asr`: "linear" (speexdsp) or "aec3" (the canceller's own output)
    # each frame's speech floor (AudioFrame.speech_floor_db; NaN: none): the analysis holds its VAD to it, as `run`
    speech_floors: np.ndarray | None = None


def espeak(text: str, voice: str) -> bytes:
    """`text` spoken by espeak-ng (`voice`), at 16 kHz. Deterministic."""
    from ..testing.speech import espeak_pcm

    return espeak_pcm(text, voice)


def noise_pcm(kind: str, seconds: float = 10.0, *, level_dbfs: float = -42.0, seed: int = 7) -> bytes:
    """Room noise at 16 kHz: `fan` (low-passed noise with a hum), `babble` (four espeak voices talking at once)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    if kind == "fan":
        white = rng.normal(0, 1, n)
        x = np.convolve(white, np.ones(8) / 8, mode="same") + 0.3 * np.sin(2 * np.pi * 120 * np.arange(n) / 16000)
    elif kind == "babble":
        lines = ["the weather was lovely on sunday afternoon", "please pass me the salt and the pepper",
                 "the news said the trains are late again", "we should paint the kitchen a lighter colour"]
        x = np.zeros(n)
        for i, line in enumerate(lines):
            voice = np.frombuffer(espeak(line, ("en-us", "en-us+f2", "en-gb", "en-us+m4")[i]), np.int16)
            clip = np.tile(voice, n // len(voice) + 1)[:n].astype(float)
            x += np.roll(clip, i * 3000)
    else:
        raise ValueError(f"unknown noise {kind!r}: none, fan or babble")
    x = x / (np.sqrt(np.mean(x**2)) + 1e-9) * 32768 * 10 ** (level_dbfs / 20)
    return np.clip(x, -32768, 32767).astype(np.int16).tobytes()


def plan(p: EarsPlan) -> tuple[list[str], list[ChildClip | None], list[ChildClip | None]]:
    """The answers' texts and, per answer, the child clip spoken over it and the one spoken after it (or None)."""
    answers = [ANSWERS[i % len(ANSWERS)] for i in range(p.answers)]
    over: list[ChildClip | None] = []
    after: list[ChildClip | None] = []
    k = 0
    for i in range(p.answers):
        clip_over = clip_after = None
        if p.overlap_every and i % p.overlap_every == p.overlap_every - 1:
            text, voice = CHILD_LINES[k % len(CHILD_LINES)], CHILD_VOICES[k % len(CHILD_VOICES)]
            clip_over = ChildClip(text, voice, espeak(text, voice), True)
            if p.silence_every:  # the same words in the same voice, in silence: the comparison
                clip_after = ChildClip(text, voice, clip_over.pcm, False)
            k += 1
        over.append(clip_over)
        after.append(clip_after)
    return answers, over, after


async def capture_on_rig(card: Any, p: EarsPlan, synthesizer: Any, *, feed_reference: bool = True,
                         hold_delay: bool = True, recognizer_echo: str = "linear",
                         barge_in_margin_db: float | None = None) -> EarsResult:
    """Play the plan on `card` (echo path and noise already added) through the runtime's front end, built as `run`
    builds it (app/ears.py `echo_stage`: AEC3, noise suppression, the recognizer's canceller).

    `barge_in_margin_db` as `[ears] barge_in_margin_db` (None: the setting's default). `recognizer_echo` as
    `[ears] recognizer_echo`: "linear" gives the recognizer speexdsp's copy (AEC3's output,
    recorded as `cancelled`, is then scored beside it on the same capture), "aec3" AEC3's own."""
    from ..adapters.sounddevice_io import SoundDeviceSink, SoundDeviceSource
    from ..app.ears import echo_stage
    from ..audio.echo_probe import RecordingCanceller
    from ..audio.echo_reference import EchoReference
    from ..audio.own_voice import OwnVoiceCheck
    from ..config import load_settings

    answers, over, after = plan(p)
    voiced = [b"".join(piece.pcm for piece in synthesizer.synthesize_blocking(text)) for text in answers]
    rate = synthesizer.sample_rate_hz
    mic = SoundDeviceSource("pulse", frame_ms=20)
    reference = EchoReference(16000)
    sink = SoundDeviceSink("pulse", reference=reference if feed_reference else None)
    env = {"TOY_EARS__RECOGNIZER_ECHO": recognizer_echo}
    if barge_in_margin_db is not None:
        env["TOY_EARS__BARGE_IN_MARGIN_DB"] = str(barge_in_margin_db)
    settings = load_settings(None, env=env)
    recorders: list[RecordingCanceller] = []

    def recording(canceller: Any) -> RecordingCanceller:
        recorders.append(RecordingCanceller(canceller))
        return recorders[-1]

    stage = echo_stage(settings, mic, reference, wrap_canceller=recording, hold_delay=hold_delay)
    recorder = recorders[0]
    raw: list[bytes] = []
    clean: list[bytes] = []
    for_asr: list[bytes] = []
    refs: list[bytes] = []
    cancelled: list[bytes] = []
    cpu = 0.0
    t0: list[float] = []
    first_answer: list[float] = []
    flushes: list[float] = []
    stop = asyncio.Event()

    from ..adapters.webrtc_vad import WebRtcVad
    from ..app.engines import endpointer_config
    from ..audio.endpointer import Endpointer, SpeechStarted
    from ..audio.level import level_db
    from ..audio.room_level import heard_as_speech
    vad = WebRtcVad(settings.vad.aggressiveness)
    endpointer: Endpointer = Endpointer(endpointer_config(settings))
    floors: list[float] = []
    playing: list[bool] = [False]
    stops: list[tuple[float, float]] = []  # (speech start, capture time; playback stopped, monotonic)
    flushing: list[asyncio.Task] = []
    checks: list[tuple[float, float, bool]] = []  # (speech start, capture time; own-voice likeness; ignored)
    stamps: list[float] = []  # each frame's capture timestamp, in order: the map onto the sample-count timeline
    timeline: list[tuple[float, ...]] = []

    async def barge_in(spoke_at: float) -> None:
        await sink.flush()  # what the voice loop does (session/voice_loop.py): the answer stops within one block
        stops.append((spoke_at, time.monotonic()))

    own_voice = OwnVoiceCheck(stage.echo_likeness, stage.recently_disturbed, stage.learning)  # as `run` builds it
    judging: list[asyncio.Task] = []  # one speech start judged at a time, as the voice loop does

    async def judge(spoke_at: float) -> None:
        # the voice loop's own check (session/voice_loop.py): does it sound like the toy itself?
        try:
            verdict = await own_voice.judge()
            checks.append((spoke_at, verdict.score, verdict.own_voice))
            if p.barge_in and not verdict.own_voice and not flushing:
                flushing.append(asyncio.create_task(barge_in(spoke_at), name="bench-ears:barge-in"))
        finally:
            judging.clear()

    async def listen() -> None:
        nonlocal cpu
        async for frame in mic:
            if not t0:
                t0.append(frame.timestamp_s)
            stamps.append(frame.timestamp_s)
            await stage.await_render(len(frame.pcm) // 2)  # as the stage's own iteration does in `run`
            started = time.process_time()
            out = stage.clean(frame)
            cpu += time.process_time() - started
            if len(stamps) % 50 == 1:
                timeline.append((frame.timestamp_s, *reference.timeline()))
            level = level_db(out.pcm)
            floors.append(math.nan if out.speech_floor_db is None else out.speech_floor_db)
            for event in endpointer.process(frame.timestamp_s, heard_as_speech(vad.is_speech(out), out, level), 20.0, level):
                if isinstance(event, SpeechStarted) and playing[0] and not judging:
                    judging.append(asyncio.create_task(judge(event.speech[0]), name="bench-ears:own-voice"))
            raw.append(frame.pcm)
            clean.append(out.pcm)
            for_asr.append(out.for_recognizer)
            refs.append(b"".join(recorder.renders))
            cancelled.append(b"".join(recorder.outputs))
            recorder.captures.clear()
            recorder.renders.clear()
            recorder.outputs.clear()
            if stop.is_set():
                return

    await mic.start()
    await sink.start()
    listener = asyncio.create_task(listen(), name="bench-ears:listen")
    try:
        await asyncio.sleep(0.5)
        for i, pcm in enumerate(voiced):
            playing[0] = True
            flushing.clear()
            await sink.play(pcm, rate, f"a{i}")
            if not first_answer:
                first_answer.append(time.monotonic())
            overlap, follow = over[i], after[i]
            overlap_at = 0.0
            if overlap is not None:
                await asyncio.sleep(p.overlap_at_s)
                overlap.played_at = overlap_at = time.monotonic()
                card.play_to_mic(overlap.pcm, 16000, wait=False, pad_ms=0)
            await sink.drain()
            playing[0] = False
            await asyncio.gather(*judging, *flushing)
            if overlap is not None:  # a stopped answer: the child's words still go on
                left = overlap_at + len(overlap.pcm) / 32000 + 0.5 - time.monotonic()
                await asyncio.sleep(max(0.0, left))
            await asyncio.sleep(0.4)
            if follow is not None:
                follow.played_at = time.monotonic()
                card.play_to_mic(follow.pcm, 16000, wait=False, pad_ms=0)
                await asyncio.sleep(len(follow.pcm) / 32000 + 0.8)
        # one flush of a playing speaker, timed: what barge-in adds after the detection
        for _ in range(5):
            await sink.play(voiced[0], rate, f"flush{_}")
            await asyncio.sleep(0.3)
            started = time.perf_counter()
            await sink.flush()
            flushes.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.5)
        out_latency_ms = _output_latency_ms(sink)
        stop.set()
        await asyncio.wait_for(listener, timeout=5)
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await sink.aclose()
        await mic.aclose()
    clips = [c for pair in zip(over, after) for c in pair if c is not None]
    on_count = _sample_timeline(stamps, 0.02)
    result = EarsResult(
        raw=np.frombuffer(b"".join(raw), np.int16), clean=np.frombuffer(b"".join(clean), np.int16),
        asr=np.frombuffer(b"".join(for_asr), np.int16),
        ref=np.frombuffer(b"".join(refs), np.int16), cancelled=np.frombuffer(b"".join(cancelled), np.int16),
        clips=clips,
        first_answer_s=(first_answer[0] - t0[0]) if first_answer and t0 else None,
        cpu_s=cpu, audio_s=len(raw) * 0.02, flush_ms=flushes, gated_frames=stage.gated, resyncs=reference.resyncs,
        stops=[(on_count(spoke), on_count(stopped)) for spoke, stopped in stops],
        output_latency_ms=out_latency_ms, underruns=sink.underruns, lead_ins=sink.lead_ins,
        underflow_gaps=reference.underflow_gaps,
        delay_nudges=list(reference.nudged),
        own_voice_checks=[(on_count(t), score, ignored) for t, score, ignored in checks],
        capture_gaps=reference.capture_gaps, underflow_gap_ms=list(reference.gap_ms),
        reference_timeline=timeline, render_waits=stage.render_waits, recognizer_echo=recognizer_echo,
        render_waited_ms=round(stage.render_waited_s * 1000, 1), speech_floors=np.array(floors))
    _place_clips(result, t0[0] if t0 else 0.0)
    return result


def _sample_timeline(stamps: list[float], frame_s: float) -> Callable[[float], float]:
    """Capture (monotonic) time → seconds into the capture by its sample count, the timeline the analysis, the
    clips and the .npz use. The two drift apart (0.28 ms/s on the virtual card): matched on timestamps, a live
    check 100 s in was 30 ms off the speech start found in the samples, 110 ms off by 375 s, and the report
    counted starts the check had ignored as false barge-ins, and read stop latencies up to 110 ms short.
    Past the last frame (a flush that ended after it), the last frame's offset holds."""
    if not stamps:
        return lambda t: t
    times = np.asarray(stamps)
    counts = np.arange(len(stamps)) * frame_s

    def on_count(t: float) -> float:
        if t >= times[-1]:
            return float(counts[-1] + (t - times[-1]))
        if t <= times[0]:
            return float(t - times[0])
        return float(np.interp(t, times, counts))

    return on_count


def _output_latency_ms(sink: Any) -> float:
    stream = getattr(sink, "_stream", None)
    try:
        return float(stream.latency) * 1000 if stream is not None else 0.0
    except Exception as exc:  # noqa: BLE001 - a closed stream: the figure is only a report
        log.debug("the output latency could not be read: %s: %s", type(exc).__name__, exc)
        return 0.0


def _place_clips(result: EarsResult, t0: float) -> None:
    """Find each child clip in the capture: from the moment it was handed to the card, by cross-correlation with
    the raw capture over the next 1.5 s (pacat's buffer lies in between)."""
    raw = result.raw.astype(np.float32)
    for clip in result.clips:
        if clip.played_at is None:
            continue
        pcm = np.frombuffer(clip.pcm, np.int16).astype(np.float32)
        lo = max(0, int((clip.played_at - t0 - 0.1) * 16000))
        window = raw[lo : lo + len(pcm) + 16000 * 3 // 2]
        if len(window) <= len(pcm):
            continue
        n = 1 << int(np.ceil(np.log2(len(window) + len(pcm))))
        corr = np.fft.irfft(np.fft.rfft(window, n) * np.conj(np.fft.rfft(pcm, n)), n)[: len(window) - len(pcm)]
        clip.start_s = (lo + int(np.argmax(corr))) / 16000


def _db(x: np.ndarray) -> float:
    return 10 * float(np.log10(np.mean(x.astype(np.float64) ** 2) + 1e-3))


def analyse(result: EarsResult, *, settings: Any = None, recognizer: Any = None) -> dict[str, Any]:
    """The figures of a capture (see the module docstring)."""
    from ..adapters.webrtc_vad import WebRtcVad
    from ..audio.endpointer import Endpointer, SpeechStarted
    from ..audio.level import level_db
    from ..audio.room_level import heard_as_speech
    from ..config import load_settings
    from ..ports.audio import AudioFrame

    settings = settings or load_settings(None, env={})
    n = min(len(result.raw), len(result.clean), len(result.ref)) // FRAME
    child = np.zeros(n, dtype=bool)  # a child is speaking in this frame (± 300 ms)
    for clip in result.clips:
        if clip.start_s is not None:
            a = int(clip.start_s / 0.02) - 15
            child[max(a, 0) : min(n, a + len(clip.pcm) // 2 // FRAME + 30)] = True
    ref_frames = result.ref[: n * FRAME].reshape(n, FRAME).astype(np.float64)
    loud = np.sqrt(np.mean(ref_frames**2, axis=1)) > 60
    sounding = np.convolve(loud, np.ones(15), mode="full")[:n] > 0  # echoes last up to 300 ms after their reference
    echo_only = sounding & ~child
    room = ~sounding & ~child
    room[: 25] = False  # the first half second: the capture starting
    raw = result.raw[: n * FRAME].reshape(n, FRAME)
    clean = result.clean[: n * FRAME].reshape(n, FRAME)
    cancelled = result.cancelled[: n * FRAME].reshape(n, FRAME)

    def erle(mask: np.ndarray, out: np.ndarray = cancelled) -> float | None:
        if not mask.any():
            return None
        return round(_db(raw[mask]) - _db(out[mask]), 1)

    first = np.zeros(n, dtype=bool)
    if result.first_answer_s is not None:
        a = int(result.first_answer_s / 0.02)
        first[a : a + 100] = True
    # false barge-ins: the runtime's own VAD and endpointer on the cleaned audio
    from ..app.engines import endpointer_config

    vad = WebRtcVad(settings.vad.aggressiveness)
    endpointer: Endpointer = Endpointer(endpointer_config(settings))
    starts: list[int] = []
    floors = result.speech_floors if result.speech_floors is not None else np.full(n, np.nan)
    for i in range(n):
        floor = float(floors[i]) if i < len(floors) and not np.isnan(floors[i]) else None
        frame = AudioFrame(clean[i].tobytes(), 16000, i * 0.02, speech_floor_db=floor)
        level = level_db(frame.pcm)
        for event in endpointer.process(i, heard_as_speech(vad.is_speech(frame), frame, level), 20.0, level):
            if isinstance(event, SpeechStarted):
                starts.append(int(event.speech[0]))
    # a start while the toy sounds and no child speaks is the toy's own voice; a start not inside any answer either
    # (noise) is counted apart
    ignored_at = [round(t / 0.02) for t, _, ignored in result.own_voice_checks if ignored]
    ignored = {s for s in starts if any(abs(s - a) <= 2 for a in ignored_at)}
    leaks = [s for s in starts if echo_only[s]]  # speech starts the toy's own voice caused
    false_barge = [s for s in leaks if s not in ignored]  # …and that the own-voice check let through
    child_ignored = sum(1 for clip in result.clips if clip.over_answer and clip.start_s is not None and any(
        abs(t - clip.start_s) < 0.3 and ign for t, _, ign in result.own_voice_checks))
    answers_played = _count_runs(sounding)
    detection_ms = []
    for clip in result.clips:
        if clip.over_answer and clip.start_s is not None:
            a = int(clip.start_s / 0.02)
            hits = [s for s in starts if a - 5 <= s <= a + 50 and s not in ignored]
            if hits:
                detection_ms.append((min(hits) - a) * 20 + settings.vad.start_ms)
    stop_ms = []  # the child's first sample → the speaker silent (flush done + the device's output latency)
    for clip in result.clips:
        if clip.over_answer and clip.start_s is not None:
            after = [stopped for spoke, stopped in result.stops if clip.start_s - 0.1 <= spoke <= clip.start_s + 1.0]
            if after:
                stop_ms.append((min(after) - clip.start_s) * 1000 + result.output_latency_ms)
    words = _recognition(result, recognizer) if recognizer is not None else {}
    if recognizer is not None and result.asr is not None and result.recognizer_echo != "aec3":
        # the same capture heard through AEC3's output, as the recognizer heard it before: the comparison
        aec3 = _recognition(replace(result, asr=result.cancelled), recognizer)
        words["aec3_words_right_over_answer_pct"] = aec3["words_right_over_answer_pct"]
        words["aec3_words_right_in_silence_pct"] = aec3["words_right_in_silence_pct"]
    return {
        "erle_db": erle(echo_only),
        "erle_first_2s_db": erle(echo_only & first),
        "erle_converged_db": erle(echo_only & ~first),
        "erle_with_gate_db": erle(echo_only, clean),
        "echo_only_s": round(float(echo_only.sum()) * 0.02, 1),
        "answers": answers_played,
        "false_barge_ins": len(false_barge),
        "own_voice_scores_child": sorted(round(score, 2) for t, score, _ in result.own_voice_checks if any(
            clip.over_answer and clip.start_s is not None and abs(t - clip.start_s) < 0.3 for clip in result.clips)),
        "own_voice_scores_toy": sorted(round(score, 2) for t, score, _ in result.own_voice_checks
                                       if 0 <= round(t / 0.02) < n and echo_only[round(t / 0.02)]),
        "own_voice_starts": len(leaks),
        "own_voice_starts_ignored": len(leaks) - len(false_barge),
        "child_starts_ignored": child_ignored,
        "speech_starts_without_child": sum(1 for s in starts if not child[s]),
        "false_barge_in_at_s": [round(s * 0.02, 2) for s in false_barge],
        "vad_speech_on_echo_raw": round(_vad_rate(vad, raw[echo_only]), 3),
        "vad_speech_on_echo_clean": round(_vad_rate(vad, clean[echo_only]), 3),
        # the room alone (nobody speaking, the toy silent): what noise suppression does for the VAD
        "vad_speech_on_room_raw": round(_vad_rate(vad, raw[room]), 3),
        "vad_speech_on_room_clean": round(_vad_rate(vad, clean[room]), 3),
        "barge_in_detect_ms": _percentiles(detection_ms),
        "barge_ins_detected": f"{len(detection_ms)}/{sum(c.over_answer for c in result.clips)}",
        "barge_in_stop_ms": _percentiles(stop_ms),
        "flush_ms": _percentiles(result.flush_ms),
        "cpu_pct_of_core": round(100 * result.cpu_s / max(result.audio_s, 1e-9), 2),
        "gated_frames": result.gated_frames,
        "resyncs": result.resyncs,
        "capture_gaps": result.capture_gaps,
        "underflow_gap_ms": result.underflow_gap_ms,
        "speaker_underruns": result.underruns,
        "speaker_lead_ins": result.lead_ins,
        "render_waits": result.render_waits,
        "render_waited_ms": result.render_waited_ms,
        "underflow_gaps": result.underflow_gaps,
        "delay_nudges": result.delay_nudges,
        **words,
    }


def _count_runs(mask: np.ndarray, gap: int = 20) -> int:
    runs, quiet = 0, gap
    for on in mask:
        if on and quiet >= gap:
            runs += 1
        quiet = 0 if on else quiet + 1
    return runs


def _vad_rate(vad: Any, frames: np.ndarray) -> float:
    from ..ports.audio import AudioFrame

    if not len(frames):
        return 0.0
    return float(np.mean([vad.is_speech(AudioFrame(f.tobytes(), 16000, 0.0)) for f in frames]))


def _percentiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"p50": round(float(np.percentile(values, 50)), 1), "p90": round(float(np.percentile(values, 90)), 1),
            "n": len(values)}


def word_accuracy(heard: str, said: str) -> float:
    """1 − word error rate (edit distance over the said words), floored at 0; both compared as lower-case words
    without punctuation (bench/hearing.py `en_key`): Whisper writes "Turn the volume down." for "turn the volume
    down", and counted as written its last word was always wrong."""
    from .hearing import en_key

    a, b = en_key(heard).split(), en_key(said).split()
    row = list(range(len(b) + 1))
    for i, wa in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, wb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (wa != wb))
    return max(0.0, 1.0 - row[-1] / max(len(b), 1))


def _recognition(result: EarsResult, recognizer: Any, shifts: Sequence[int] | None = None) -> dict[str, Any]:
    """Words right, per clip, of the child recognized from what the recognizer got (`asr`, else the cleaned
    capture): over an answer vs in silence.

    Each clip is heard at every alignment of `shifts` (samples more of the capture before it; bench/hearing.py
    `SHIFTS`): Whisper's text moves with a few ms of alignment by 3-7 points on a row of 42 clips, more than the
    issue's 10-point comparison can bear on fewer."""
    from .hearing import SHIFTS

    scores: dict[bool, list[float]] = {True: [], False: []}
    heard: list[dict[str, Any]] = []
    stream = result.clean if result.asr is None else result.asr
    for clip in result.clips:
        if clip.start_s is None:
            continue
        b = int((clip.start_s + len(clip.pcm) / 32000 + 0.3) * 16000)
        texts = []
        for shift in shifts or SHIFTS:
            a = max(0, int((clip.start_s - 0.3) * 16000) - shift)
            pcm = stream[a:b].tobytes()
            recognizer.start_utterance()
            for i in range(0, len(pcm), 640):
                recognizer.accept(pcm[i : i + 640])
            texts.append(recognizer.finish())
            scores[clip.over_answer].append(word_accuracy(texts[-1], clip.text))
        heard.append({"said": clip.text, "voice": clip.voice, "over_answer": clip.over_answer, "heard": texts})
    mean = lambda xs: round(100 * sum(xs) / len(xs), 1) if xs else None  # noqa: E731
    return {"words_right_over_answer_pct": mean(scores[True]), "words_right_in_silence_pct": mean(scores[False]),
            "heard": heard}
