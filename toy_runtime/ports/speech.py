"""Speech engine ports: streaming recognition (ASR) and sentence-wise synthesis (TTS).

PCM is signed 16-bit little-endian mono. Recognizer calls block on CPU: call them from a worker thread
(toy_runtime.audio.listener does). Synthesizers do their own threading and expose an async iterator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, Protocol, runtime_checkable

from ..errors import ToyError

__all__ = ["SpeechRecognizer", "SpeechSynthesizer", "SynthesizedAudio", "SpeechEngineError"]


class SpeechEngineError(ToyError):
    """An ASR/TTS engine that cannot load or failed. `code` is stable, e.g. "asr-model-missing", "tts-failed"."""

    code = "speech_engine_failed"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@runtime_checkable
class SpeechRecognizer(Protocol):
    """Streaming recognizer: one utterance at a time, fed while the user speaks.

    Life cycle per utterance: start_utterance() → accept(pcm)* → finish() (or reset() to abandon it).
    All methods block; they must not be called concurrently (one worker thread).
    """

    sample_rate_hz: int

    def start_utterance(self) -> None:
        """Begin a new utterance (implicitly abandons an unfinished one)."""
        ...

    def accept(self, pcm: bytes) -> str | None:
        """Decode more audio; returns the partial transcript when it changed, else None."""
        ...

    def finish(self) -> str:
        """End the utterance and return its final transcript ("" when nothing was recognised)."""
        ...

    def reset(self) -> None:
        """Abandon the current utterance, if any, and clear decoder state."""
        ...


@dataclass(frozen=True, slots=True)
class SynthesizedAudio:
    """One synthesized piece (a sentence or clause) of int16 mono PCM."""

    pcm: bytes
    sample_rate_hz: int
    text: str = ""
    trimmed_ms: float = 0.0  # leading silence removed from this piece

    @property
    def duration_ms(self) -> float:
        """Length of the audio in milliseconds."""
        return len(self.pcm) / 2 * 1000.0 / self.sample_rate_hz


@runtime_checkable
class SpeechSynthesizer(Protocol):
    """Text to speech, one piece per sentence, produced off the event loop."""

    sample_rate_hz: int

    def synthesize(self, text: str) -> AsyncIterator[SynthesizedAudio]:
        """Async iterator of audio pieces for `text`, in order; the first arrives as soon as it is synthesized."""
        ...
