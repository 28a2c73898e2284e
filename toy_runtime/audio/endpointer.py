"""Utterance endpointing as a pure state machine over (frame, is_speech, frame_ms).

It never reads a clock and never calls a model (the pattern of Home Assistant's assist_pipeline/vad.py): time is
the sum of the frame durations it is given, so tests on synthetic frame sequences are exact. Positions in events
are milliseconds since the last `reset()`.

Rules
- Idle: frames are kept in a pre-roll buffer. Speech opens after `start_ms` of *consecutive* speech frames; the
  opening event carries the pre-roll (at most `preroll_ms` before the speech run) and the speech run itself.
- Open: every further frame is passed on (`SpeechContinues`), silent ones too, so a recognizer hears the tail.
  Speech ends after `hangover_ms` of consecutive silence (reason "hangover"), or when the utterance (from the first
  speech frame) reaches `max_utterance_ms` (reason "max_length"). A hangover end whose speech (first to last speech
  frame) lasted less than `min_utterance_ms` is `TooShort` instead: a cough or a click, to be discarded.
- End of speech by level (when frames come with a level, `process(..., level_db=)`): the WebRTC VAD keeps calling
  frames speech for ~80-120 ms after speech became inaudible (its own overhang plus quiet tails), so the hangover
  counts from the end of the last frame that is speech *and* loud: level ≥ max(noise floor + `floor_margin_db`,
  the utterance's loudest frame − `peak_range_db`). The noise floor follows the non-speech frames (starts at the
  first one, then down at once, up by `floor_rise_db_per_s`). The level may move the end at most `level_credit_ms`
  (and ¾ of the hangover) before the VAD's own end; an utterance without a single loud frame (a speaker the level
  rule cannot tell from the noise) ends by the VAD alone, as does everything without levels.
- `hold(ms)`: the wait for the open utterance's current silence, instead of `hangover_ms` (end-of-turn prediction:
  audio/turn_end.py; shorter on a finished sentence, longer on one that trails off). Speech resuming restores it.
- `no_speech_timeout_ms` (optional): after a reset and after each end, if that much audio passes without speech
  opening, `NoSpeechTimeout` is emitted once (then the timer is disarmed until the next reset or end).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar, Union, cast

F = TypeVar("F")

__all__ = [
    "EndpointerConfig",
    "Endpointer",
    "SpeechStarted",
    "SpeechContinues",
    "SpeechEnded",
    "TooShort",
    "NoSpeechTimeout",
    "EndpointEvent",
]


@dataclass(frozen=True)
class EndpointerConfig:
    """Endpointing durations, all in milliseconds. The runtime builds it from `[vad]` (app/engines.py); the
    defaults here are `[vad]`'s own, so a unit test or a bench that builds one bare gets the toy's behaviour
    (tests/audio/test_defaults_agree.py holds them equal: one knob, one default)."""

    preroll_ms: float = 300.0
    start_ms: float = 60.0
    hangover_ms: float = 300.0
    min_utterance_ms: float = 250.0
    max_utterance_ms: float = 15000.0
    no_speech_timeout_ms: float | None = None
    level_end: bool = True  # False: ignore frame levels, the end of speech is the VAD's last speech frame
    floor_margin_db: float = 15.0
    peak_range_db: float = 40.0
    floor_rise_db_per_s: float = 3.0
    level_credit_ms: float = 150.0
    initial_floor_db: float | None = None  # None: the first non-speech frame's level

    def __post_init__(self) -> None:
        if self.start_ms <= 0 or self.hangover_ms <= 0:
            raise ValueError("start_ms and hangover_ms must be > 0")
        if self.preroll_ms < 0 or self.min_utterance_ms < 0:
            raise ValueError("preroll_ms and min_utterance_ms must be >= 0")
        if self.max_utterance_ms <= max(self.start_ms, self.min_utterance_ms):
            raise ValueError("max_utterance_ms must exceed start_ms and min_utterance_ms")
        if self.no_speech_timeout_ms is not None and self.no_speech_timeout_ms <= 0:
            raise ValueError("no_speech_timeout_ms must be > 0 or None")
        if self.level_credit_ms < 0 or self.floor_rise_db_per_s < 0:
            raise ValueError("level_credit_ms and floor_rise_db_per_s must be >= 0")


@dataclass(frozen=True)
class SpeechStarted(Generic[F]):
    """Speech opened. `preroll` came before the speech run, `speech` is the run that opened it (current frame last)."""

    preroll: tuple[F, ...]
    speech: tuple[F, ...]
    speech_start_ms: float
    at_ms: float

    @property
    def frames(self) -> tuple[F, ...]:
        """Pre-roll then speech: everything a recognizer should hear first."""
        return self.preroll + self.speech


@dataclass(frozen=True)
class SpeechContinues(Generic[F]):
    """A frame inside an open utterance (speech or hangover silence)."""

    frame: F
    is_speech: bool


@dataclass(frozen=True)
class SpeechEnded:
    """The utterance is complete. `speech_end_ms` is the end of speech (of the last loud speech frame when levels
    are given, else of the last speech frame); `at_ms` when it was decided."""

    reason: Literal["hangover", "max_length"]
    speech_start_ms: float
    speech_end_ms: float
    at_ms: float

    @property
    def speech_ms(self) -> float:
        """Duration from the first to the end of the last speech frame."""
        return self.speech_end_ms - self.speech_start_ms


@dataclass(frozen=True)
class TooShort:
    """An opened utterance whose speech lasted less than `min_utterance_ms`: discard it."""

    speech_start_ms: float
    speech_end_ms: float
    at_ms: float

    @property
    def speech_ms(self) -> float:
        """Duration from the first to the end of the last speech frame."""
        return self.speech_end_ms - self.speech_start_ms


@dataclass(frozen=True)
class NoSpeechTimeout:
    """No speech opened within `no_speech_timeout_ms` of the last reset or utterance end."""

    waited_ms: float
    at_ms: float


EndpointEvent = Union[SpeechStarted, SpeechContinues, SpeechEnded, TooShort, NoSpeechTimeout]


@dataclass
class _Idle(Generic[F]):
    history: deque = field(default_factory=deque)  # (frame, frame_ms) before and including the current run
    run_ms: float = 0.0  # consecutive speech at the end of history
    run_frames: int = 0


class Endpointer(Generic[F]):
    """The endpointing state machine. Frames are opaque to it (an AudioFrame in the runtime, ints in tests)."""

    _timeout_total: float | None
    _timeout_left: float | None

    def __init__(self, config: EndpointerConfig | None = None) -> None:
        self.config = config or EndpointerConfig()
        self.reset()

    def reset(self) -> None:
        """Back to idle, pre-roll emptied, position 0, no-speech timer re-armed."""
        self._pos = 0.0
        self._open = False
        self._idle: _Idle[F] = _Idle()
        self._speech_start = 0.0
        self._last_speech_end = 0.0  # end of the last frame the VAD called speech
        self._last_loud_end: float | None = None  # end of the last speech frame above the level threshold
        self._peak_db: float | None = None  # loudest frame of the open utterance
        self._floor_db: float | None = self.config.initial_floor_db
        self._hold_ms: float | None = None  # hold(): this silence's wait, while the speech end stays at _hold_from
        self._hold_from = 0.0
        self._arm_timeout()

    @property
    def noise_floor_db(self) -> float | None:
        """The current noise-floor estimate (dBFS) from the non-speech frames' levels (None: none seen yet)."""
        return self._floor_db

    @property
    def in_speech(self) -> bool:
        """True while an utterance is open."""
        return self._open

    @property
    def position_ms(self) -> float:
        """Milliseconds of audio processed since the last reset."""
        return self._pos

    @property
    def speech_end_ms(self) -> float | None:
        """While an utterance is open: where its speech ends so far (the position the hangover counts from).
        It only moves forward, and it moves when speech resumes. None while idle."""
        return self._speech_end() if self._open else None

    def hold(self, hangover_ms: float) -> None:
        """End the open utterance after `hangover_ms` of silence from its current speech end (instead of the
        configured hangover); speech resuming (`resumed_after`) restores the configured one. No effect while idle.
        The next frame ends it if that much silence has passed already."""
        if hangover_ms <= 0:
            raise ValueError("hangover_ms must be > 0")
        if self._open:
            self._hold_ms, self._hold_from = hangover_ms, self._speech_end()

    @property
    def hangover_now_ms(self) -> float:
        """The wait that applies to the current silence: the held one until speech resumes, or the configured
        hangover."""
        if self._hold_ms is not None and self._open and not self.resumed_after(self._hold_from):
            return self._hold_ms
        return self.config.hangover_ms

    def resumed_after(self, at_ms: float) -> bool:
        """Whether speech came back after `at_ms` (a speech end reached before): a speech frame at speaking level
        after it. The VAD's own overhang, or a quiet room it takes for speech, only creeps the end of speech
        forward (by `level_credit_ms` less than the VAD's end): that is not the child going on. Without levels (or
        in an utterance with no loud frame at all), any speech frame after it."""
        if not self._open:
            return False
        if self._last_loud_end is None:
            return self._last_speech_end > at_ms
        return self._last_loud_end > at_ms

    def process(self, frame: F, is_speech: bool, frame_ms: float, level_db: float | None = None
                ) -> list[EndpointEvent]:
        """Feed one frame; returns the events it causes, in order (usually none or one). `level_db`: the frame's
        RMS level in dBFS (None: the end of speech is the VAD's alone)."""
        if frame_ms <= 0:
            raise ValueError("frame_ms must be > 0")
        start = self._pos
        self._pos += frame_ms
        if not self.config.level_end:
            level_db = None
        if level_db is not None and not is_speech:
            rise = self.config.floor_rise_db_per_s * frame_ms / 1000.0
            self._floor_db = level_db if self._floor_db is None else min(level_db, self._floor_db + rise)
        if self._open:
            return self._process_open(frame, is_speech, frame_ms, start, level_db)
        events = self._process_idle(frame, is_speech, frame_ms, start)
        if level_db is not None and events and isinstance(events[0], SpeechStarted):
            self._peak_db = level_db  # the opening run's earlier frames are not known here: start from this one
            self._last_loud_end = start + frame_ms if level_db >= self._threshold_db() else None
        return events

    def _threshold_db(self) -> float:
        cfg = self.config
        by_floor = -200.0 if self._floor_db is None else self._floor_db + cfg.floor_margin_db
        by_peak = -200.0 if self._peak_db is None else self._peak_db - cfg.peak_range_db
        return max(by_floor, by_peak)

    def _speech_end(self) -> float:
        # The VAD's end, moved back to the last loud speech frame by at most level_credit_ms (and at most 3/4 of the
        # hangover: the utterance then still needs a quarter of it in VAD silence to close, so a pause in the middle
        # of quiet speech is never cut by the level rule alone). No loud frame at all (no levels, or a speaker the
        # level rule cannot tell from the noise): the VAD's end.
        if self._last_loud_end is None:
            return self._last_speech_end
        credit = min(self.config.level_credit_ms, 0.75 * self.config.hangover_ms)
        return max(self._last_loud_end, self._last_speech_end - credit)

    def _process_idle(self, frame: F, is_speech: bool, frame_ms: float, start: float) -> list[EndpointEvent]:
        cfg = self.config
        idle = self._idle
        idle.history.append((frame, frame_ms))
        if is_speech:
            idle.run_ms += frame_ms
            idle.run_frames += 1
        else:
            idle.run_ms = 0.0
            idle.run_frames = 0
        if idle.run_ms >= cfg.start_ms:
            return [self._open_speech(start + frame_ms)]
        self._trim_preroll()
        events: list[EndpointEvent] = []
        if self._timeout_left is not None:
            self._timeout_left -= frame_ms
            if self._timeout_left <= 0:
                events.append(NoSpeechTimeout(waited_ms=cast(float, self._timeout_total), at_ms=self._pos))
                self._timeout_left = None
        return events

    def _trim_preroll(self) -> None:
        # Keep at most preroll_ms of audio before the current speech run.
        idle = self._idle
        before = len(idle.history) - idle.run_frames
        before_ms = sum(ms for _, ms in list(idle.history)[:before])
        while before > 0 and before_ms > self.config.preroll_ms:
            _, ms = idle.history.popleft()
            before_ms -= ms
            before -= 1

    def _open_speech(self, now: float) -> SpeechStarted:
        idle = self._idle
        self._trim_preroll()
        items = list(idle.history)
        split = len(items) - idle.run_frames
        preroll = tuple(f for f, _ in items[:split])
        speech = tuple(f for f, _ in items[split:])
        speech_start = now - idle.run_ms
        self._open = True
        self._speech_start = speech_start
        self._last_speech_end = now
        self._last_loud_end = None
        self._peak_db = None
        self._idle = _Idle()
        self._timeout_left = None
        return SpeechStarted(preroll=preroll, speech=speech, speech_start_ms=speech_start, at_ms=now)

    def _process_open(self, frame: F, is_speech: bool, frame_ms: float, start: float,
                      level_db: float | None) -> list[EndpointEvent]:
        cfg = self.config
        now = start + frame_ms
        events: list[EndpointEvent] = [SpeechContinues(frame=frame, is_speech=is_speech)]
        if is_speech:
            self._last_speech_end = now
            if level_db is not None:
                self._peak_db = level_db if self._peak_db is None else max(self._peak_db, level_db)
                if level_db >= self._threshold_db():
                    self._last_loud_end = now
        end = self._speech_end()
        if now - self._speech_start >= cfg.max_utterance_ms:
            events.append(SpeechEnded("max_length", self._speech_start, end, now))
            self._close()
        elif now - end >= self.hangover_now_ms:
            # too short by the VAD's span, as before the end by level: the level end must not turn a short "no"
            # (whose VAD span includes the overhang) into a discarded click
            if self._last_speech_end - self._speech_start < cfg.min_utterance_ms:
                events.append(TooShort(self._speech_start, self._last_speech_end, now))
            else:
                events.append(SpeechEnded("hangover", self._speech_start, end, now))
            self._close()
        return events

    def _close(self) -> None:
        self._open = False
        self._hold_ms = None
        self._last_loud_end = None
        self._peak_db = None
        self._idle = _Idle()
        self._arm_timeout()

    def _arm_timeout(self) -> None:
        self._timeout_total = self.config.no_speech_timeout_ms
        self._timeout_left = self._timeout_total
