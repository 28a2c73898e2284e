"""One voice for a bilingual toy: Chinese sentences in the Mandarin voice, all others in the main (English) voice.

The speaker plays one stream at one rate, so Mandarin pieces are resampled to the main voice's rate, and scaled
by one gain measured at load (`loudness_gain`): the child should not hear the toy get louder or quieter when it
changes language.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

from toy_runtime.language import has_cjk
from toy_runtime.ports.speech import SpeechSynthesizer, SynthesizedAudio

__all__ = ["BilingualVoice", "active_rms", "loudness_gain"]

_LOUDNESS_PROBES = {"en": "Hello there! Shall we read a story together?", "zh": "你好呀！我们一起读一个故事吧？"}


def active_rms(pcm: bytes, sample_rate_hz: int, *, frame_ms: float = 20.0, floor_db: float = -40.0) -> float:
    """RMS over the 20 ms frames within `floor_db` of the loudest frame (speech, not its pauses), in int16 units."""
    import numpy as np

    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    size = max(1, int(sample_rate_hz * frame_ms / 1000))
    frames = samples[: len(samples) // size * size].reshape(-1, size)
    if not len(frames):
        return 0.0
    power = (frames ** 2).mean(axis=1)
    active = power[power >= power.max() * 10 ** (floor_db / 10)]
    return float(np.sqrt(active.mean())) if len(active) else 0.0


def loudness_gain(main: Any, mandarin: Any) -> float:
    """The gain that gives the Mandarin voice the main voice's loudness (active RMS of a sample sentence each;
    both need `synthesize_blocking`). Clamped to [0.25, 4]."""
    def level(voice: Any, text: str) -> float:
        pieces = voice.synthesize_blocking(text)
        return active_rms(b"".join(p.pcm for p in pieces), voice.sample_rate_hz)

    en, zh = level(main, _LOUDNESS_PROBES["en"]), level(mandarin, _LOUDNESS_PROBES["zh"])
    return min(4.0, max(0.25, en / zh)) if en > 0 and zh > 0 else 1.0


class BilingualVoice:
    """SpeechSynthesizer: text with Han characters goes to `mandarin`, the rest to `main`; Mandarin pieces are
    resampled to `main`'s rate and multiplied by `gain` (see `loudness_gain`)."""

    def __init__(self, main: SpeechSynthesizer, mandarin: SpeechSynthesizer, *, gain: float = 1.0) -> None:
        self.main = main
        self.mandarin = mandarin
        self.gain = gain
        self.sample_rate_hz = main.sample_rate_hz

    def _adapt(self, piece: SynthesizedAudio) -> SynthesizedAudio:
        import numpy as np

        from toy_runtime.audio.resample import resample

        pcm = piece.pcm
        if self.gain != 1.0:
            scaled = np.frombuffer(pcm, dtype="<i2").astype(np.float32) * self.gain
            pcm = np.clip(scaled, -32767, 32767).astype(np.int16).tobytes()
        if piece.sample_rate_hz != self.sample_rate_hz:
            pcm = resample(pcm, piece.sample_rate_hz, self.sample_rate_hz)
        return SynthesizedAudio(pcm, self.sample_rate_hz, piece.text, piece.trimmed_ms)

    async def synthesize(self, text: str) -> AsyncIterator[SynthesizedAudio]:
        """The pieces of `text` in the voice of its language."""
        if has_cjk(text):
            async for piece in self.mandarin.synthesize(text):
                yield self._adapt(piece)
        else:
            async for piece in self.main.synthesize(text):
                yield piece

    def synthesize_blocking(self, text: str) -> list[SynthesizedAudio]:
        """All pieces of `text` at once (tests, benches, the demo's preparation)."""
        if has_cjk(text):
            return [self._adapt(p) for p in self.mandarin.synthesize_blocking(text)]  # type: ignore[attr-defined]
        return list(self.main.synthesize_blocking(text))  # type: ignore[attr-defined]

    def warm_up(self) -> None:
        """Warm both voices."""
        for voice in (self.main, self.mandarin):
            if hasattr(voice, "warm_up"):
                voice.warm_up()

    def close(self) -> None:
        """Close both voices."""
        for voice in (self.main, self.mandarin):
            if hasattr(voice, "close"):
                voice.close()
