"""Speaking a turn: Speech items → TTS (worker thread) → the audio sink, the first clause first.

Segments are synthesized one after another as they arrive, so the first clause plays while later ones are still
being synthesized. Only text that the turn marked as speech ever reaches the synthesizer.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from ..ports.audio import AudioSink
from ..ports.speech import SpeechSynthesizer
from .items import Speech

_END = object()


@dataclass
class AnswerMarks:
    """Monotonic times of one answer's audio milestones (None = did not happen)."""

    first_text_at: float | None = None
    first_clause_started_at: float | None = None
    first_clause_synthesized_at: float | None = None
    first_audio_at: float | None = None
    spoken: list[str] = field(default_factory=list)


class TurnSpeaker:
    """Speaks one turn's answers through a synthesizer and a sink. Use `say()` then `finish()` (or `cancel()`)."""

    def __init__(self, synthesizer: SpeechSynthesizer, sink: AudioSink, turn_id: str, *, queue_size: int = 32,
                 clock=time.monotonic) -> None:
        self.synthesizer = synthesizer
        self.sink = sink
        self.turn_id = turn_id
        self.clock = clock
        self.marks: dict[int, AnswerMarks] = {}
        self.failures: list[str] = []  # sentences skipped because TTS or playback failed
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=queue_size)  # bounded: text waits, never piles up
        self._first_sample_waiters: list[asyncio.Task] = []
        self._task = asyncio.create_task(self._run(), name=f"speak:{turn_id}")

    def answer_id(self, answer: int) -> str:
        return f"{self.turn_id}.a{answer}"

    async def say(self, speech: Speech) -> None:
        marks = self.marks.setdefault(speech.answer, AnswerMarks())
        if marks.first_text_at is None:
            marks.first_text_at = self.clock()
            self._first_sample_waiters.append(asyncio.create_task(
                self._await_first_sample(speech.answer), name=f"first-sample:{self.answer_id(speech.answer)}"))
        await self._queue.put(speech)

    async def finish(self) -> None:
        """All text given: wait until it is synthesized, queued and played out."""
        await self._queue.put(_END)
        try:
            await self._task
            await self.sink.drain()
        finally:
            await self._settle_waiters()

    async def cancel(self) -> None:
        """Barge-in / shutdown: stop synthesizing and flush queued audio within one block."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self.sink.flush()
        await self._settle_waiters()

    async def _settle_waiters(self) -> None:
        for waiter in self._first_sample_waiters:
            if not waiter.done():
                waiter.cancel()
        await asyncio.gather(*self._first_sample_waiters, return_exceptions=True)

    async def _await_first_sample(self, answer: int) -> None:
        at = await self.sink.first_sample(self.answer_id(answer))
        if at is not None:
            self.marks[answer].first_audio_at = at

    async def _run(self) -> None:
        while True:
            speech = await self._queue.get()
            if speech is _END:
                return
            marks = self.marks[speech.answer]
            if marks.first_clause_started_at is None:
                marks.first_clause_started_at = self.clock()
            try:
                async for piece in self.synthesizer.synthesize(speech.text):
                    if marks.first_clause_synthesized_at is None:
                        marks.first_clause_synthesized_at = self.clock()
                    await self.sink.play(piece.pcm, piece.sample_rate_hz, self.answer_id(speech.answer))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one sentence that cannot be synthesized or played must not end the turn
                self.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            marks.spoken.append(speech.text)
