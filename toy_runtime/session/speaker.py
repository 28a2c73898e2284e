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
    # every sentence handed to the sink, in play order, with its seconds of audio (a cut-off one: what was queued)
    queued: list[tuple[Speech, float]] = field(default_factory=list)


def heard_part(text: str, fraction: float) -> str:
    """The first `fraction` of a sentence's words (characters for Chinese), as heard when it was cut off: whole
    words only, '…' after them; '' when not even one word was heard."""
    from ..language import has_cjk

    units = list(text) if has_cjk(text) else text.split()
    keep = int(len(units) * max(0.0, min(1.0, fraction)))
    if keep <= 0:
        return ""
    if keep >= len(units):
        return text
    return ("" if has_cjk(text) else " ").join(units[:keep]).rstrip(" ,，、;；:：") + "…"


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
        self._open = asyncio.Event()  # cleared by hold(): audio is synthesized but not played
        self._open.set()
        self._first_sample_waiters: list[asyncio.Task] = []
        self._task = asyncio.create_task(self._run(), name=f"speak:{turn_id}")

    def heard(self, until: float) -> list[Speech]:
        """What of this turn sounded before `until` (the moment playback was stopped): each answer's sentences from
        its first sample on, back to back, the one cut off shortened to the words that had played. An answer that
        never sounded contributes nothing. (Gaps inside an answer are rare and counted by the sink; ignoring them
        can only credit a word or two too many.)"""
        heard: list[Speech] = []
        for answer in sorted(self.marks):
            marks = self.marks[answer]
            if marks.first_audio_at is None or marks.first_audio_at >= until:
                continue
            left = until - marks.first_audio_at
            for speech, seconds in marks.queued:
                if left >= seconds:
                    heard.append(speech)
                    left -= seconds
                    continue
                part = heard_part(speech.text, left / seconds if seconds > 0 else 0.0)
                if part:
                    heard.append(Speech(speech.answer, part, kind=speech.kind))
                break
        return heard

    def answer_id(self, answer: int) -> str:
        return f"{self.turn_id}.a{answer}"

    async def say(self, speech: Speech) -> None:
        marks = self.marks.setdefault(speech.answer, AnswerMarks())
        if marks.first_text_at is None:
            marks.first_text_at = self.clock()
            self._first_sample_waiters.append(asyncio.create_task(
                self._await_first_sample(speech.answer), name=f"first-sample:{self.answer_id(speech.answer)}"))
        await self._queue.put(speech)

    def hold(self) -> None:
        """Play nothing more until `release()`: the child may be going on (synthesis goes on, so the answer is
        ready the moment it is released)."""
        self._open.clear()

    def release(self) -> None:
        """Play again after `hold()`."""
        self._open.set()

    @property
    def held(self) -> bool:
        """Whether playback is held."""
        return not self._open.is_set()

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
            seconds = 0.0
            try:
                async for piece in self.synthesizer.synthesize(speech.text):
                    if marks.first_clause_synthesized_at is None:
                        marks.first_clause_synthesized_at = self.clock()
                    await self._open.wait()
                    await self.sink.play(piece.pcm, piece.sample_rate_hz, self.answer_id(speech.answer))
                    seconds += len(piece.pcm) / 2 / piece.sample_rate_hz
            except asyncio.CancelledError:
                if seconds:
                    marks.queued.append((speech, seconds))  # its first pieces may already be sounding
                raise
            except Exception as exc:  # one sentence that cannot be synthesized or played must not end the turn
                self.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            marks.queued.append((speech, seconds))
            marks.spoken.append(speech.text)
