"""`toy-runtime demo`: the main job on embedded defaults — no API key, no sound card, no network.

Scripted child utterances are synthesized with piper, fed through the real capture → VAD → ASR path from a file
source, answered (the offline gate, or the configured LLM endpoint), spoken by piper into WAV files, and a
per-turn timeline is printed. Piper runs without its random noise, so every run hears and says the same audio.
Each line of the script says what the toy must do (demo_script); the summary counts a line as understood only
when that happened — the volume changed, the session ended, the model answered — not when words were heard.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TextIO, cast

from ..config import Settings, with_updates
from .demo_script import DEFAULT_SCRIPT, Line, Verdict, as_lines, judge

if TYPE_CHECKING:
    from ..ports.audio import AudioSource

__all__ = ["DEFAULT_SCRIPT", "run_demo", "summary", "synthesize_script"]


async def synthesize_script(synthesizer, lines: Sequence[str], rate: int = 16000) -> list[bytes]:
    """Child utterances as 16 kHz PCM (piper speech, resampled)."""
    from ..audio.resample import resample

    out = []
    for line in lines:
        pieces = [p async for p in synthesizer.synthesize(line)]
        pcm = b"".join(resample(p.pcm, p.sample_rate_hz, rate) for p in pieces)
        out.append(pcm)
    return out


def _fmt(ms):
    return "—" if ms is None else f"{ms:7.1f}"


def print_timeline(record, stream: TextIO) -> None:
    """One readable block per turn: what was heard, said, done, and when (ms after the end of speech)."""
    w = record.waterfall_ms()
    print(f"\nturn {record.turn}: heard {record.text!r}", file=stream)
    for line in record.spoken:
        print(f"  toy said: {line}", file=stream)
    for event in record.events:
        print(f"  event: {event['name']} → {event['status']}", file=stream)
    print("  timeline (ms after end of speech): "
          f"endpoint {_fmt(w['endpoint'])} | ASR final {_fmt(w['asr_final'])} | first token {_fmt(w['first_token'])}"
          f" | first clause synthesized {_fmt(w['first_clause_synthesized'])} | first audio {_fmt(w['first_audio'])}",
          file=stream)
    if record.terminated:
        print("  session ended", file=stream)


def print_verdict(verdict: Verdict, stream: TextIO) -> None:
    """Whether the toy did what the line asked."""
    if verdict.understood:
        print(f"  understood: {verdict.line.expect.description}", file=stream)
    else:
        print(f"  NOT understood: wanted {verdict.line.expect.description}, but {verdict.problem}", file=stream)


def summary(verdicts: Sequence[Verdict]) -> str:
    """One paragraph: how many lines were understood, and what went wrong with the others."""
    done = sum(1 for v in verdicts if v.understood)
    text = f"{done} of {len(verdicts)} utterances understood (the toy did what was asked)"
    missed = [f"  {v.line.text!r}: wanted {v.line.expect.description}, but {v.problem}"
              for v in verdicts if not v.understood]
    return "\n".join([text + (";" if missed else "."), *missed])


async def run_demo(settings: Settings, out_dir: Path, *, script: Sequence[Line | str] = DEFAULT_SCRIPT,
                   stream: TextIO | None = None, json_lines: bool = False, progress: TextIO | None = None) -> int:
    """Run the scripted demo; returns the exit code (0 when every line got a turn, understood or not).

    Turns and the summary go to `stream` (stdout); with `json_lines` it gets JSON lines only and the loading
    lines go to `progress` (stderr), so `demo --json | jq` reads clean JSON.
    """
    from ..adapters.wav_io import WavFileSink, write_wav
    from .engines import build_recognizer, build_synthesizer, build_vad, endpointer_config, turn_end_policy
    from .runtime import build_console, build_runtime
    from ..audio.listener import Listener
    from ..fakes.audio import GatedMicrophone
    from .firmware_link import start_link
    from .voice_app import close_voice, voice_loop

    stream = stream or sys.stdout
    progress = progress or (sys.stderr if json_lines else stream)
    lines = as_lines(script)
    settings = with_updates(settings, tts={"deterministic": True})  # the same speech every run
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print("toy-runtime demo — loading models…", file=progress, flush=True)
    synthesizer, recognizer = await asyncio.gather(asyncio.to_thread(build_synthesizer, settings),
                                                   asyncio.to_thread(build_recognizer, settings))
    vad = build_vad(settings)
    loaded = time.monotonic()
    mode = settings.agent.tool_invocation_mode if settings.llm_online else "offline gate (no LLM endpoint)"
    print(f"models ready in {(loaded - started) * 1000:.0f} ms; answering with: {mode}", file=progress, flush=True)
    # the demo's microphone is a file and its speaker WAV files: no echo to cancel, no room, no wake word
    print("ears: echo cancellation, noise suppression and wake word off (file microphone, WAV speaker); "
          "barge-in off", file=progress, flush=True)

    utterances = await synthesize_script(synthesizer, [line.text for line in lines])
    for i, pcm in enumerate(utterances, 1):
        write_wav(out_dir / f"child-{i}.wav", pcm, 16000)
    mic = GatedMicrophone(utterances, frame_ms=settings.audio.frame_ms)
    console = build_console(settings, "demo")  # None unless --web / [web] listen
    listener = Listener(cast("AudioSource", console.metered(mic) if console else mic), vad, recognizer,
                        endpointer_config(settings), early_final_ms=settings.asr.early_final_ms,
                        turn_end=turn_end_policy(settings))
    runtime = build_runtime(settings, audit_tap=console.audit_tap if console else None)
    if console is not None:
        console.attach(runtime)
    verdicts: list[Verdict] = []
    judging: list[asyncio.Task] = []
    mixer_before = [await runtime.mixer.get()]

    async def judge_turn(record) -> None:
        # the next line plays only after this one is judged: the mixer state read here is this turn's result
        try:
            after = await runtime.mixer.get()
            line = lines[len(verdicts)] if len(verdicts) < len(lines) else Line(record.text)
            verdict = judge(line, record, mixer_before[0], after)
            mixer_before[0] = after
            verdicts.append(verdict)
            if json_lines:
                print(json.dumps({"type": "demo_verdict", **verdict.as_dict()}, ensure_ascii=False), file=stream,
                      flush=True)
            else:
                print_verdict(verdict, stream)
        finally:
            mic.next_turn()

    def on_turn(record) -> None:
        if json_lines:
            print(json.dumps({"type": "voice_turn", **record.as_audit()}, ensure_ascii=False), file=stream,
                  flush=True)
        else:
            print_timeline(record, stream)
        judging.append(asyncio.create_task(judge_turn(record), name=f"demo:judge-turn{record.turn}"))

    loop = voice_loop(runtime, listener, synthesizer, new_sink=lambda: WavFileSink(out_dir, prefix="toy-"),
                      barge_in=False, on_turn=on_turn)
    link = None
    try:
        await runtime.warm()  # so the printed timelines do not include importing the LLM SDK
        link = await start_link(runtime, console)  # the firmware (or firmware-sim) sees states and volume too
        if console is not None:
            from ..session.voice_loop import CloseSession

            await console.start(end_session=lambda: loop.post(CloseSession(reason="console")))  # URL on stderr
        await loop.run(once=True)
        await asyncio.gather(*judging)
    finally:
        for task in judging:
            task.cancel()
        if judging:
            await asyncio.wait(judging)
        await close_voice(console=console, link=link, listener=listener, mic=mic, runtime=runtime,
                          synthesizer=synthesizer)
    turns = len(verdicts)
    verdicts += [Verdict(line, None, "no turn came of it") for line in lines[turns:]]
    if json_lines:
        print(json.dumps({"type": "demo_summary", "understood": sum(v.understood for v in verdicts),
                          "utterances": len(verdicts)}), file=stream)
    else:
        print(f"\n{summary(verdicts)}\naudio in {out_dir}/ "
              f"(child-N.wav = what the child said, toy-*.wav = what the toy answered)", file=stream)
    return 0 if turns else 1
