"""Test speech: each text synthesized once, joined into one clip, and kept for the rest of the run.

    voice = PiperSynthesizer(deterministic=True)   # no random noise: one text, one waveform
    phrases = PhraseCache(voice)
    audio = phrases.speak("tell me a story")       # SynthesizedAudio at the voice's rate
    pcm = phrases.speak_at("tell me a story", 16000)

Only a deterministic voice makes recognition results repeatable: piper's default noise changes every synthesis,
and PocketSphinx hears some of those variants wrong. The cache saves the synthesis time and is no substitute for it:
`is_deterministic` checks a voice by synthesizing twice.
"""

from __future__ import annotations

import hashlib
from typing import Protocol, Sequence

from toy_runtime.ports.speech import SynthesizedAudio

__all__ = ["PhraseCache", "espeak_pcm", "is_deterministic"]


class BlockingSynthesizer(Protocol):
    """What the cache needs of a voice: all pieces of a text at once (PiperSynthesizer.synthesize_blocking)."""

    def synthesize_blocking(self, text: str) -> Sequence[SynthesizedAudio]: ...


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _joined(voice: BlockingSynthesizer, text: str) -> SynthesizedAudio:
    pieces = voice.synthesize_blocking(text)
    if not pieces:
        raise ValueError(f"the voice produced no audio for {text!r}")
    return SynthesizedAudio(pcm=b"".join(p.pcm for p in pieces), sample_rate_hz=pieces[0].sample_rate_hz, text=text)


def is_deterministic(voice: BlockingSynthesizer, text: str) -> bool:
    """True when two syntheses of `text` are byte-identical."""
    return _joined(voice, text).pcm == _joined(voice, text).pcm


class PhraseCache:
    """text → one SynthesizedAudio of the whole text (sentences joined), synthesized on first use only."""

    def __init__(self, voice: BlockingSynthesizer) -> None:
        self.voice = voice
        self._clips: dict[str, SynthesizedAudio] = {}
        self._resampled: dict[tuple[str, int], bytes] = {}
        self.syntheses = 0  # how many texts were actually synthesized

    def speak(self, text: str) -> SynthesizedAudio:
        """The clip for `text` at the voice's own rate."""
        key = _key(text)
        clip = self._clips.get(key)
        if clip is None:
            clip = self._clips[key] = _joined(self.voice, text)
            self.syntheses += 1
        return clip

    def speak_at(self, text: str, sample_rate_hz: int) -> bytes:
        """The clip's PCM resampled to `sample_rate_hz`."""
        key = (_key(text), sample_rate_hz)
        pcm = self._resampled.get(key)
        if pcm is None:
            from toy_runtime.audio.resample import resample  # numpy: only when a test resamples

            clip = self.speak(text)
            pcm = self._resampled[key] = resample(clip.pcm, clip.sample_rate_hz, sample_rate_hz)
        return pcm


def espeak_pcm(text: str, voice: str = "en-us", *, speed: int | None = None, sample_rate_hz: int = 16000) -> bytes:
    """`text` spoken by espeak-ng in `voice` (a voice the toy never speaks with), int16 mono at `sample_rate_hz`.
    Deterministic. Needs the `espeak-ng` program (apt install espeak-ng)."""
    import io
    import subprocess
    import wave

    from ..audio.resample import resample

    speed_args = ["-s", str(speed)] if speed is not None else []
    out = subprocess.run(["espeak-ng", "-v", voice, *speed_args, "--stdout", text], capture_output=True,
                         check=True).stdout
    with wave.open(io.BytesIO(out)) as w:
        return resample(w.readframes(w.getnframes()), w.getframerate(), sample_rate_hz)
