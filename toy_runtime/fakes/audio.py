"""In-memory fakes of the audio and speech ports, for tests of the session and the listener.

ListSource (mic), GatedMicrophone (a mic that waits for each answer: the demo), MemorySink (speaker), ScriptedVAD (energy threshold), ScriptedASR (scripted transcripts),
SilentTTS / ToneTTS (deterministic PCM). No vendor libraries, no devices, no threads.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import deque
from typing import AsyncIterator, Iterable, Sequence

import numpy as np

from toy_runtime.audio.pcm_io import PcmSource, RecordingSink
from toy_runtime.ports.audio import AudioFrame
from toy_runtime.ports.speech import SynthesizedAudio

__all__ = ["GatedMicrophone", "ListSource", "MemorySink", "ScriptedVAD", "ScriptedASR", "SilentTTS", "ToneTTS", "tone", "silence"]


def silence(ms: float, sample_rate_hz: int = 16000) -> bytes:
    """`ms` of int16 zeros."""
    return b"\0" * (int(sample_rate_hz * ms / 1000) * 2)


def tone(ms: float, sample_rate_hz: int = 16000, freq_hz: float = 440.0, amplitude: int = 8000) -> bytes:
    """`ms` of a sine tone: loud enough for ScriptedVAD, deterministic."""
    n = int(sample_rate_hz * ms / 1000)
    t = np.arange(n) / sample_rate_hz
    return (amplitude * np.sin(2 * math.pi * freq_hz * t)).astype("<i2").tobytes()


class ListSource(PcmSource):
    """A mic fed from PCM bytes (or from a list of PCM pieces, concatenated), as 16 kHz frames.

    `ListSource.from_segments([("speech", 800), ("silence", 400)])` builds tone/silence sequences quickly.
    """

    def __init__(self, pcm: bytes | Sequence[bytes], input_rate_hz: int = 16000, **kwargs) -> None:
        if not isinstance(pcm, (bytes, bytearray, memoryview)):
            pcm = b"".join(pcm)
        super().__init__(bytes(pcm), input_rate_hz, **kwargs)

    @classmethod
    def from_segments(cls, segments: Iterable[tuple[str, float]], **kwargs) -> "ListSource":
        """Build from ("speech"|"silence", ms) pairs; speech is a tone that ScriptedVAD hears as speech."""
        rate = kwargs.get("sample_rate_hz", 16000)
        parts = [tone(ms, rate) if kind == "speech" else silence(ms, rate) for kind, ms in segments]
        return cls(b"".join(parts), rate, **kwargs)


class MemorySink(RecordingSink):
    """A speaker that records chunks with their write times; see RecordingSink for `realtime` pacing."""


class ScriptedVAD:
    """Energy VAD: a frame is speech when its RMS exceeds `threshold` (ScriptedVAD hears `tone()` as speech)."""

    def __init__(self, threshold: float = 500.0) -> None:
        self.threshold = threshold
        self.calls = 0

    def is_speech(self, frame: AudioFrame) -> bool:
        """RMS above threshold."""
        self.calls += 1
        x = np.frombuffer(frame.pcm, dtype="<i2").astype(np.float32)
        if len(x) == 0:
            return False
        return float(np.sqrt(np.mean(x * x))) > self.threshold


class ScriptedASR:
    """A recognizer that returns the next scripted transcript at each `finish()` ("" when the script is used up).

    It records what it was fed (`utterance_ms`, calls), so tests can check that audio reached the ASR only
    while speech was open. Partials are the first k words of the scripted text, growing every `partial_every_ms`.
    """

    def __init__(self, transcripts: Iterable[str] = (), *, sample_rate_hz: int = 16000,
                 partial_every_ms: float = 0.0) -> None:
        self.sample_rate_hz = sample_rate_hz
        self._script: deque[str] = deque(transcripts)
        self._partial_every_ms = partial_every_ms
        self._in_utt = False
        self._fed_ms = 0.0
        self._last_partial = ""
        self.utterance_ms: list[float] = []  # audio fed per finished utterance
        self.total_fed_ms = 0.0
        self.starts = 0
        self.resets = 0

    def add(self, *transcripts: str) -> None:
        """Append to the script."""
        self._script.extend(transcripts)

    def start_utterance(self) -> None:
        """Begin an utterance."""
        self.starts += 1
        self._in_utt = True
        self._fed_ms = 0.0
        self._last_partial = ""

    def accept(self, pcm: bytes) -> str | None:
        """Count the audio; maybe return a growing partial (starts an utterance if none is open, like the real ones)."""
        if not self._in_utt:
            self.start_utterance()
        ms = len(pcm) / 2 * 1000.0 / self.sample_rate_hz
        self._fed_ms += ms
        self.total_fed_ms += ms
        if self._partial_every_ms <= 0 or not self._script:
            return None
        words = self._script[0].split()
        k = min(len(words), int(self._fed_ms // self._partial_every_ms))
        partial = " ".join(words[:k])
        if partial and partial != self._last_partial:
            self._last_partial = partial
            return partial
        return None

    def finish(self) -> str:
        """The next scripted transcript ("" and nothing consumed when no utterance is open)."""
        if not self._in_utt:
            return ""
        self._in_utt = False
        self.utterance_ms.append(self._fed_ms)
        return self._script.popleft() if self._script else ""

    def reset(self) -> None:
        """Abandon the utterance."""
        self.resets += 1
        self._in_utt = False


def _sentences(text: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", text.strip())]
    return [p for p in parts if p]


class _FakeTTS:
    def __init__(self, sample_rate_hz: int = 22050, ms_per_char: float = 50.0, delay_s: float = 0.0) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.ms_per_char = ms_per_char
        self.delay_s = delay_s  # simulated synthesis time per sentence
        self.texts: list[str] = []  # every text given to synthesize(), for "nothing hidden was spoken" checks

    def _pcm(self, sentence: str) -> bytes:
        raise NotImplementedError

    async def synthesize(self, text: str) -> AsyncIterator[SynthesizedAudio]:
        """One piece per sentence, `ms_per_char` long each character."""
        self.texts.append(text)
        for sentence in _sentences(text):
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            yield SynthesizedAudio(pcm=self._pcm(sentence), sample_rate_hz=self.sample_rate_hz, text=sentence)


class SilentTTS(_FakeTTS):
    """Synthesizes silence of a length proportional to the text."""

    def _pcm(self, sentence: str) -> bytes:
        return silence(len(sentence) * self.ms_per_char, self.sample_rate_hz)


class ToneTTS(_FakeTTS):
    """Synthesizes a 440 Hz tone of a length proportional to the text (audible in recordings)."""

    def _pcm(self, sentence: str) -> bytes:
        return tone(len(sentence) * self.ms_per_char, self.sample_rate_hz)


class GatedMicrophone:
    """A file-backed AudioSource that plays one utterance, then waits until the runtime answered it.

    Like a child who waits for the toy to finish before speaking again; the audio still goes through the real
    frame → VAD → endpointer → ASR path. The silence after each utterance outlasts the longest end-of-turn wait
    ([vad] unfinished_ms, 1,200 ms): a line the toy takes for unfinished still ends.
    """

    def __init__(self, utterances: Sequence[bytes], *, sample_rate_hz: int = 16000, frame_ms: int = 20,
                 lead_silence_ms: int = 300, tail_silence_ms: int = 1500) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.frame_ms = frame_ms
        self._utterances = list(utterances)
        self._lead = lead_silence_ms
        self._tail = tail_silence_ms
        self._gate = asyncio.Event()
        self._gate.set()
        self._closed = False

    @property
    def overflows(self) -> int:
        return 0

    def next_turn(self) -> None:
        """Let the next utterance play."""
        self._gate.set()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def aclose(self) -> None:
        self._closed = True
        self._gate.set()

    def __aiter__(self) -> AsyncIterator:
        return self._frames()

    async def _frames(self):
        for pcm in self._utterances:
            await self._gate.wait()
            if self._closed:
                return
            self._gate.clear()
            source = ListSource(pcm, self.sample_rate_hz, sample_rate_hz=self.sample_rate_hz, frame_ms=self.frame_ms,
                                lead_silence_ms=self._lead, tail_silence_ms=self._tail, realtime=True)
            await source.start()
            async for frame in source:
                yield frame
            await source.aclose()
        await self._gate.wait()  # let the last answer finish before the source ends
