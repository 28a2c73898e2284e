"""The listening stage: mic frames → VAD → endpointer → streaming ASR → utterances.

Idle listening costs one VAD call per frame, and a source that can (ports.audio.RelaxableSource) is asked to hand
its frames over in groups until the VAD hears speech. Audio reaches the recognizer only while an utterance is open,
and it is decoded *while the user speaks* (one dedicated worker thread, calls queued in order), so after the end of
speech only the recognizer's final step remains — and with `early_final_ms` even that runs during the hangover:
once the utterance has been silent that long, the recognizer is finished early (it needs no more of the tail), and
when the endpoint then comes the transcript is already there. If speech resumes before the endpoint, the early
result is dropped and the recognizer hears the whole utterance again from the listener's copy of it. With a
`turn_end` policy the early transcript also sets how long this silence may last (audio/turn_end.py): a finished
sentence ends the turn as soon as its transcript is in, one that trails off ("I want… um…") waits longer. `pause()`
makes the listener deaf (half-duplex: the toy does not hear itself); frames are still drained from the source so
its queue never overflows.

Run `events()` in its own named task and iterate it continuously; hand its events to the session through a
bounded queue of your own.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Literal, Union

from toy_runtime.audio.endpointer import (
    Endpointer,
    EndpointerConfig,
    NoSpeechTimeout,
    SpeechContinues,
    SpeechEnded,
    SpeechStarted,
    TooShort,
)
from toy_runtime.audio.level import level_db
from toy_runtime.audio.room_level import heard_as_speech
from toy_runtime.audio.turn_end import TurnEndPolicy, classify
from toy_runtime.ports.audio import AudioFrame, AudioSource, RelaxableSource, VoiceActivityDetector
from toy_runtime.ports.speech import SpeechEngineError, SpeechRecognizer

__all__ = [
    "Listener",
    "ListenerEvent",
    "SpeechStart",
    "PartialTranscript",
    "Utterance",
    "UtteranceDiscarded",
    "ListeningTimeout",
]


@dataclass(frozen=True)
class SpeechStart:
    """The user started speaking. `at` is the source time of the first speech sample."""

    at: float
    detected_at: float  # clock time when the listener saw it


@dataclass(frozen=True)
class PartialTranscript:
    """The recognizer's running hypothesis for the open utterance."""

    text: str


@dataclass(frozen=True)
class EarlyTranscript:
    """The transcript so far, early in a silence, and the end-of-turn wait it set (audio/turn_end.py): the session
    may start answering it while the toy waits (speculation); an Utterance follows, with these words if the child
    said no more."""

    text: str
    turn_class: str  # complete | unfinished | unsure
    wait_ms: float  # the silence the turn may still take, from the end of speech
    silent_ms: float  # the silence so far


@dataclass(frozen=True)
class Utterance:
    """A finished utterance and the timings a latency report needs.

    Source times (`started_at`, `ended_at`, `endpoint_at`) come from frame timestamps; clock times
    (`decided_at`, `asr_final_at`) from the listener's clock. With a live or real-time paced source both are
    `time.monotonic()`; with an as-fast-as-possible file source only the clock times are wall time.
    """

    text: str
    started_at: float  # first speech sample
    ended_at: float  # end of speech: the last loud speech frame (see the endpointer), or the VAD's last speech frame
    endpoint_at: float  # end of the frame that closed the utterance (ended_at + hangover, or max length)
    decided_at: float  # clock: the closing frame was processed
    asr_final_at: float  # clock: the final transcript was ready
    audio_ms: float  # audio given to the recognizer (pre-roll + speech + tail)
    reason: Literal["hangover", "max_length"]
    capture_lag_s: float = 0.0  # closing frame captured → processed (only known when source times are the clock's)
    # what ended the turn's last silence: the predicted class of its transcript (audio/turn_end.py: complete,
    # unfinished, unsure) or "fixed" (no prediction: none configured, or the transcript came after the hangover)
    turn_end: str = "fixed"

    @property
    def end_of_speech_clock(self) -> float:
        """The end of speech on the listener's clock: decision − capture lag − hangover."""
        return self.decided_at - self.capture_lag_s - max(self.endpoint_at - self.ended_at, 0.0)

    @property
    def hangover_ms(self) -> float:
        """Time between the end of speech and the endpoint decision."""
        return (self.endpoint_at - self.ended_at) * 1000.0

    @property
    def asr_final_ms(self) -> float:
        """Time the recognizer needed after the endpoint decision."""
        return (self.asr_final_at - self.decided_at) * 1000.0


@dataclass(frozen=True)
class UtteranceDiscarded:
    """An opened utterance that was dropped: too short, the listener was paused while it was open, or it carried
    the wake word (what came after it is the request)."""

    reason: Literal["too_short", "paused", "wake_word"]
    speech_ms: float


@dataclass(frozen=True)
class ListeningTimeout:
    """No speech within the endpointer's `no_speech_timeout_ms` since the last reset/resume/utterance."""

    waited_ms: float
    at: float  # source time


ListenerEvent = Union[SpeechStart, PartialTranscript, EarlyTranscript, Utterance, UtteranceDiscarded,
                      ListeningTimeout]


class Listener:
    """Consumes an AudioSource and yields ListenerEvents; owns the recognizer's worker thread if not given one."""

    def __init__(
        self,
        source: AudioSource,
        vad: VoiceActivityDetector,
        recognizer: SpeechRecognizer,
        config: EndpointerConfig | None = None,
        *,
        executor: Executor | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_pending_frames: int = 50,
        partials: bool = True,
        live_source: bool | None = None,
        early_final_ms: float | None = None,
        turn_end: TurnEndPolicy | None = None,
    ) -> None:
        self._source = source
        self._vad = vad
        self._asr = recognizer
        self._endpointer: Endpointer[AudioFrame] = Endpointer(config)
        self._own_executor = executor is None
        # One thread: recognizer calls must stay ordered and never run concurrently.
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="asr")
        self._clock = clock
        self._max_pending = max_pending_frames  # ~1 s of 20 ms frames queued for the recognizer, then backpressure
        self._partials = partials
        # frame levels to the endpointer: the end of speech by level, not after the VAD's overhang
        self._levels = self._endpointer.config.level_end
        # Frame times on this listener's clock (a live device timestamped with time.monotonic): the capture lag is
        # then measurable. Default: the source says so with a `live_clock` attribute.
        self._live = bool(getattr(source, "live_clock", False)) if live_source is None else live_source
        self._paused = False
        # a source that can group its frames is asked to while nothing is heard (fewer loop wake-ups when idle)
        self._relax = source.relax_delivery if isinstance(source, RelaxableSource) else None
        self._relaxed = False
        self._pending: deque[Future] = deque()
        self._speech_started_at = 0.0
        self._last_speech_end = 0.0
        self._audio_ms = 0.0
        self._discarded_ms: float | None = None
        self._discard_reason: Literal["paused", "wake_word"] = "paused"
        # Early final: after this much silence in the hangover the recognizer is finished (None: at the endpoint).
        # The listener keeps the utterance's audio meanwhile, to replay it if speech resumes.
        hangover = self._endpointer.config.hangover_ms
        self._early_final_ms = early_final_ms if early_final_ms and early_final_ms < hangover else None
        self._utterance_pcm: list[bytes] = []
        self._early: Future | None = None  # the recognizer's finish(), submitted during the hangover
        self._early_speech_end = 0.0  # the endpointer's speech end when it was submitted
        self.early_finals = 0  # finals taken from the hangover (for tests and metrics)
        self.early_final_replays = 0  # early finals dropped because speech resumed
        # End-of-turn prediction: the early final's text sets this silence's wait (needs the early final)
        self._turn_end = turn_end if self._early_final_ms is not None else None
        self._turn_class: str | None = None  # the class of the early final's text, once it is in

    @property
    def endpointer(self) -> Endpointer[AudioFrame]:
        """The endpointing state machine (read-only use: `in_speech`, `config`)."""
        return self._endpointer

    @property
    def paused(self) -> bool:
        """True while deaf (half-duplex: the toy is speaking)."""
        return self._paused

    def pause(self) -> None:
        """Stop listening: frames are drained and ignored; an open utterance is discarded at the next frame."""
        self._paused = True

    def resume(self) -> None:
        """Listen again from a clean state (no pre-roll from before the pause, no-speech timer re-armed)."""
        self._paused = False
        if self._endpointer.in_speech:  # paused and resumed between two frames: still discard that utterance
            self._discarded_ms = (self._last_speech_end - self._speech_started_at) * 1000.0
            self._abandon()
        self._endpointer.reset()

    def restart(self) -> None:
        """Drop the utterance in progress and listen afresh (the wake word was in it: what follows is the request)."""
        if self._endpointer.in_speech:
            self._discarded_ms = (self._last_speech_end - self._speech_started_at) * 1000.0
            self._discard_reason = "wake_word"
            self._abandon()
        self._endpointer.reset()

    async def utterances(self) -> AsyncIterator[Utterance]:
        """Only the finished utterances of `events()`."""
        async for event in self.events():
            if isinstance(event, Utterance):
                yield event

    async def events(self) -> AsyncIterator[ListenerEvent]:
        """Consume the source until it ends, yielding speech starts, partials, utterances, discards, timeouts."""
        try:
            async for frame in self._source:
                if self._discarded_ms is not None:
                    yield UtteranceDiscarded(self._discard_reason, self._discarded_ms)
                    self._discarded_ms, self._discard_reason = None, "paused"
                if self._paused:
                    if self._relax is not None and not self._relaxed:
                        self._relaxed = True  # deaf: no frame is needed at once
                        self._relax(True)
                    if self._endpointer.in_speech:
                        speech_ms = (self._last_speech_end - self._speech_started_at) * 1000.0
                        self._abandon()
                        self._endpointer.reset()
                        yield UtteranceDiscarded("paused", speech_ms)
                    continue
                early = self._predict_turn_end()
                if early is not None:
                    yield early
                level = level_db(frame.pcm) if self._levels or frame.speech_floor_db is not None else None
                # while the toy talks, the room's own "speech" is not the child's (audio/room_level.py)
                is_speech = self._vad.is_speech(frame)
                if level is not None:
                    is_speech = heard_as_speech(is_speech, frame, level)
                for ep_event in self._endpointer.process(frame, is_speech, frame.duration_ms,
                                                         level if self._levels else None):
                    async for out in self._handle(ep_event, frame):
                        yield out
                if self._relax is not None and self._relaxed != (idle := not (is_speech or self._endpointer.in_speech)):
                    self._relaxed = idle  # every frame at once from the first speech frame to the endpoint
                    self._relax(idle)
                if self._partials:
                    for text in self._harvest():
                        yield PartialTranscript(text)
        finally:
            if self._endpointer.in_speech:
                self._endpointer.reset()
                try:
                    self._abandon()
                except RuntimeError:  # the worker was already shut down by aclose()
                    pass

    async def _handle(self, event, frame: AudioFrame) -> AsyncIterator[ListenerEvent]:
        if isinstance(event, SpeechStarted):
            first = event.speech[0]
            self._speech_started_at = first.timestamp_s
            self._last_speech_end = frame.end_s
            self._audio_ms = sum(f.duration_ms for f in event.frames)
            self._drop_early()
            self._utterance_pcm = []
            self._submit(self._asr.start_utterance)
            # Frame by frame, not one joined buffer: engines that hold the GIL while decoding (pocketsphinx does)
            # would otherwise stall the event loop for the whole pre-roll (~100-250 ms measured).
            for f in event.frames:
                await self._feed(f.for_recognizer)
            yield SpeechStart(at=first.timestamp_s, detected_at=self._clock())
        elif isinstance(event, SpeechContinues):
            if event.is_speech:
                self._last_speech_end = event.frame.end_s
            self._audio_ms += event.frame.duration_ms
            await self._continue(event.frame.for_recognizer)
        elif isinstance(event, SpeechEnded):
            decided_at = self._clock()
            lag = decided_at - frame.end_s if self._live else 0.0
            lag = lag if 0.0 <= lag < 1.0 else 0.0  # a stalled or foreign clock: no correction
            turn_class = self._turn_class
            text = await self._finish()
            yield Utterance(
                text=text,
                started_at=self._speech_started_at,
                ended_at=frame.end_s - (event.at_ms - event.speech_end_ms) / 1000.0,
                endpoint_at=frame.end_s,
                decided_at=decided_at,
                asr_final_at=self._clock(),
                audio_ms=self._audio_ms,
                reason=event.reason,
                capture_lag_s=lag,
                turn_end=turn_class if event.reason == "hangover" and turn_class else "fixed",
            )
        elif isinstance(event, TooShort):
            self._abandon()
            yield UtteranceDiscarded("too_short", event.speech_ms)
        elif isinstance(event, NoSpeechTimeout):
            yield ListeningTimeout(waited_ms=event.waited_ms, at=frame.end_s)

    async def _continue(self, pcm: bytes) -> None:
        """A frame of the open utterance: to the recognizer, unless it was finished early; finish it early, or
        start over when speech resumed after an early finish."""
        if self._early_final_ms is None:
            await self._feed(pcm)
            return
        speech_end = self._endpointer.speech_end_ms
        if self._early is not None and self._endpointer.resumed_after(self._early_speech_end):
            # speech resumed: the early transcript misses it; the recognizer hears the whole utterance again. Not
            # on the VAD's overhang or a room it takes for speech (quiet frames): live, each such frame replayed
            # the utterance and decoded it again, ~0.2 s of the recognizer's thread per 20 ms frame, and the
            # listener fell seconds behind the mic (docs/benchmarks.md, "Turn-taking", the pause session)
            self._drop_early()
            self.early_final_replays += 1
            replay, self._utterance_pcm = self._utterance_pcm, []
            self._submit(self._asr.start_utterance)
            for piece in replay:
                await self._feed(piece)
        if self._early is not None:
            self._utterance_pcm.append(pcm)  # kept for a replay; the finished recognizer needs no more tail
            return
        await self._feed(pcm)
        if speech_end is not None and self._endpointer.position_ms - speech_end >= self._early_final_ms:
            # submitted straight to the worker, outside _pending: its text is the final, not a partial
            self._early = self._executor.submit(self._asr.finish)
            self._early_speech_end = speech_end
            if self._turn_end is not None:
                # no end before the transcript says what kind of end this is: on a busy machine a slow decode
                # would otherwise let the fixed hangover cut "can you tell me…" (bounded by the longest wait)
                self._endpointer.hold(self._turn_end.unfinished_ms)

    def _predict_turn_end(self) -> EarlyTranscript | None:
        """Once the early final is in, its text sets how long this silence may last (before the next frame is
        endpointed, so a finished sentence ends on it). Speech resuming drops the early final, and the wait with
        it (the endpointer restores its own when the speech end moves)."""
        early = self._early
        if self._turn_end is None or early is None or self._turn_class is not None or not early.done():
            return None
        if early.exception() is not None:
            self._turn_class = "fixed"  # the error surfaces from _finish(); the fixed hangover ends the turn
            self._endpointer.hold(self._endpointer.config.hangover_ms)
            return None
        result = early.result()
        text = result if isinstance(result, str) else ""
        self._turn_class = classify(text)
        wait = self._turn_end.wait_ms(text)
        self._endpointer.hold(wait)
        speech_end = self._endpointer.speech_end_ms
        silent = self._endpointer.position_ms - speech_end if speech_end is not None else 0.0
        return EarlyTranscript(text.strip(), self._turn_class, wait, silent)

    def _abandon(self) -> None:
        """Drop the open utterance: the recognizer is reset, an early final and the replay copy forgotten."""
        self._drop_early()
        self._utterance_pcm = []
        self._submit(self._asr.reset)

    def _drop_early(self) -> None:
        """Forget an early final (its result, if any, is not wanted)."""
        early, self._early = self._early, None
        self._turn_class = None
        if early is not None:
            early.add_done_callback(lambda fut: fut.exception())  # retrieved: no "never retrieved" warning

    def _submit(self, fn: Callable, *args) -> Future:
        fut = self._executor.submit(fn, *args)
        self._pending.append(fut)
        return fut

    async def _feed(self, pcm: bytes) -> None:
        if self._early_final_ms is not None:
            self._utterance_pcm.append(pcm)
        self._submit(self._asr.accept, pcm)
        # Backpressure: if the recognizer is more than ~max_pending frames behind, wait for it; the mic queue
        # absorbs the pause (and counts overflows if it cannot).
        while len(self._pending) > self._max_pending:
            oldest = self._pending[0]
            await asyncio.wrap_future(oldest)
            self._collect(oldest)
            self._pending.popleft()

    def _harvest(self) -> list[str]:
        texts: list[str] = []
        while self._pending and self._pending[0].done():
            text = self._collect(self._pending.popleft())
            if text:
                texts.append(text)
        return texts

    def _collect(self, fut: Future) -> str | None:
        try:
            result = fut.result()
        except SpeechEngineError:
            raise
        except Exception as exc:
            raise SpeechEngineError("asr-failed", f"recognizer failed: {exc}") from exc
        return result if isinstance(result, str) else None

    async def _finish(self) -> str:
        self._utterance_pcm = []
        self._turn_class = None
        early, self._early = self._early, None
        if early is not None:
            self.early_finals += 1
            await asyncio.wrap_future(early)
            while self._pending:  # submitted before it, so done; collected for their errors
                self._collect(self._pending.popleft())
            return (self._collect(early) or "").strip()
        fut = self._submit(self._asr.finish)
        await asyncio.wrap_future(fut)
        text = ""
        while self._pending:  # everything before finish is done too (one ordered worker)
            done = self._pending.popleft()
            result = self._collect(done)
            if done is fut:
                text = result or ""
        return text.strip()

    async def aclose(self) -> None:
        """Release the worker thread (if the listener created it). The source is closed by its owner."""
        if self._own_executor:
            # Let queued calls (a reset, a tail of accepts) run: the recognizer must be left clean.
            await asyncio.to_thread(self._executor.shutdown, wait=True)
