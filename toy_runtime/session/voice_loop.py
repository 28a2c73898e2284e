"""The audio session: idle → listening → thinking → speaking → (listening | closed).

A session opens on VAD speech (always-listening), on push-to-talk, or on a host event (a button, a reminder). The
mic is half-duplex by default: the listener is paused while the toy thinks and speaks, so it never answers itself.
With barge-in on, user speech during an answer flushes playback and discards the turn (its not-yet-started events
never run); speech begun before the child could have heard the answer goes on with her turn (session/going_on.py).
`session.terminate` → the farewell plays to the end → sibling events finish → the session closes its output stream.
Cleanup is the same on normal end, stop, device error and SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, cast

from ..audio.listener import (EarlyTranscript, ListenerEvent, ListeningTimeout, PartialTranscript, SpeechStart,
                              Utterance, UtteranceDiscarded)
from ..audio.own_voice import OwnVoiceCheck, OwnVoiceVerdict
from ..audit import AuditKind, AuditSink
from ..host.envelope import HostEvent, message_event
from ..metrics.voice_turn import VoiceTurnRecord
from ..ports.audio import AudioSink
from ..ports.speech import SpeechSynthesizer
from ..signals import SessionState, SignalBus, StateSignal
from .going_on import joined_text, went_on
from .items import Answer, EventOutcome, SessionEnd, Speech, SpeechKind, TurnEnd
from .speaker import TurnSpeaker
from .turn import TurnRunner


@dataclass(frozen=True)
class OpenSession:
    """Control message: open a session now (button, push-to-talk, host event)."""

    reason: str
    announce: str | None = None  # text to speak as soon as it opens (e.g. a reminder)
    done: asyncio.Future | None = None  # resolved True once the announcement was spoken
    earcon: bool = False  # a short chime as it opens: the wake word was heard, the toy listens


@dataclass(frozen=True)
class CloseSession:
    """Control message: close the current session (button long-press, remote command)."""

    reason: str


@dataclass(frozen=True)
class Stop:
    """Control message: shut the loop down (SIGTERM)."""


Inbox = ListenerEvent | OpenSession | CloseSession | Stop

MAX_RECORDS = 200
# Speculate only when the turn will wait at least this much longer: a finished sentence ends as its transcript
# comes in, and a request sent then saves nothing and costs one more when the child goes on
SPECULATE_MIN_WAIT_MS = 60.0
# The utterance that follows a speech start it began with starts within this of it (the listener's pre-roll and
# start rule move its first sample); a later one is other words
SAME_SPEECH_S = 1.0
# A held answer (a speech start while the toy thinks) plays anyway this long after the hold began, if the listener
# has not said what that speech was by then (it always does: an utterance, with words or none, or one dropped, by
# [vad] max_utterance_ms at the latest); this bounds a fault
HOLD_LIMIT_S = 20.0


def _no_words(message: Inbox) -> bool:
    """Whether `message` is the listener's word that the speech it reported held none: dropped, or no transcript."""
    return isinstance(message, UtteranceDiscarded) or (isinstance(message, Utterance) and not message.text.strip())


@dataclass(frozen=True)
class _WentOn:
    """A turn stopped because the child went on: her words so far, and what she heard of the answer (kept for the
    history only if her going on comes to nothing)."""

    utterance: Utterance
    heard: list[Speech]
    resumed_at: float  # source time: when her next words started


class VoiceLoop:
    """Owns the listener and the speaker; opens and closes audio sessions; publishes states."""

    def __init__(
        self,
        *,
        new_runner: Callable[[], TurnRunner],
        listener_events: Callable[[], Any],
        pause_listener: Callable[[], None],
        resume_listener: Callable[[], None],
        synthesizer: SpeechSynthesizer,
        new_sink: Callable[[], AudioSink],
        signals: SignalBus,
        audit: AuditSink,
        idle_timeout_s: float = 20.0,
        barge_in: bool = False,
        open_on_speech: bool = True,
        inbox_size: int = 64,
        clock: Callable[[], float] = time.monotonic,
        on_turn: Callable[[VoiceTurnRecord], None] | None = None,
        on_item: Callable[[Utterance | Speech | EventOutcome | TurnEnd], None] | None = None,
        keep_output_open: bool = False,
        own_voice: OwnVoiceCheck | None = None,
        speculate: bool = False,
        resume_window_s: float = 0.0,
    ) -> None:
        self.new_runner = new_runner
        self._listener_events = listener_events
        self._pause = pause_listener
        self._resume = resume_listener
        self.synthesizer = synthesizer
        self.new_sink = new_sink  # one output stream per session: opened when it opens, released when it closes
        # …unless the echo canceller needs one unbroken render stream: then the first session's stays open (a
        # restarted stream moves the echo by its new buffering, and the canceller would have to learn it again)
        self.keep_output_open = keep_output_open
        # Whether the speech that just started sounds like the toy itself (the echo canceller's double-talk check,
        # audio/own_voice.py): if so, a speech start during an answer is not a barge-in
        self.own_voice = own_voice
        # Speculative answering: an early transcript whose wait is still long is sent to the model at once
        # (TurnRunner.speculate); the turn adopts the answer if the child said no more
        self.speculate = speculate
        # With barge-in: speech begun this soon after the child's last words, before she could have heard the answer,
        # goes on with her turn (0: off)
        self.resume_window_s = resume_window_s
        self._went_on: _WentOn | None = None  # the turn she is going on from, until her next words arrive
        self.sink: AudioSink | None = None
        self.signals = signals
        self.audit = audit
        self.idle_timeout_s = idle_timeout_s
        self.barge_in = barge_in
        self.open_on_speech = open_on_speech
        self.clock = clock
        self.on_turn = on_turn
        self.on_item = on_item  # live view (the terminal transcript): the heard utterance, then the turn's items
        self.inbox: asyncio.Queue[Inbox] = asyncio.Queue(maxsize=inbox_size)
        self.state: SessionState | None = None  # published as IDLE when run() starts
        self.runner: TurnRunner | None = None
        self.records: list[VoiceTurnRecord] = []  # the latest spoken turns (bounded: the service runs for weeks)
        self.sessions = 0
        self.sink_open = False
        self.source_ended = asyncio.Event()
        self._turns = 0
        self._deferred: list[Inbox] = []  # control messages that arrived during a barge-in watch
        # A speech start judged the toy's own voice: what the listener makes of that speech (an early transcript, the
        # utterance) is not the child's either, even when it arrives after the answer has ended — the echo of the
        # answer's last words ends after the answer does. A clean-clone CI run answered "I could think the point
        # outside" (the echo of "…play outside") as the child's next turn when this lived only while the answer did.
        self._own_voice_open = False

    # -- inputs ---------------------------------------------------------------------------------------

    def post(self, message: Inbox) -> bool:
        """Hand a control message to the loop without blocking; False when the inbox is full."""
        try:
            self.inbox.put_nowait(message)
            return True
        except asyncio.QueueFull:
            self.audit.record(AuditKind.VOICE_INBOX_FULL, message=type(message).__name__)
            return False

    async def _pump_listener(self) -> None:
        try:
            async for event in self._listener_events():
                await self.inbox.put(event)  # bounded: back-pressure reaches the listener, never unbounded growth
        except asyncio.CancelledError:
            raise  # we stopped it: the source did not end
        except Exception as exc:
            self.audit.record(AuditKind.VOICE_SOURCE_FAILED, error=f"{type(exc).__name__}: {exc}")
            self.source_ended.set()
        else:
            self.source_ended.set()

    # -- states ---------------------------------------------------------------------------------------

    def _set_state(self, state: SessionState) -> None:
        if state is self.state:
            return
        self.state = state
        session_id = self.runner.conversation.session_id if self.runner else None
        self.signals.publish(StateSignal(state=state, session_id=session_id))
        self.audit.record(AuditKind.VOICE_STATE, state=state.value, session_id=session_id)

    # -- the loop -------------------------------------------------------------------------------------

    async def run(self, *, once: bool = False) -> None:
        """Serve sessions until Stop, the end of the audio source, or (with once) the first session's end."""
        pump = asyncio.create_task(self._pump_listener(), name="voice:listener")
        self._set_state(SessionState.IDLE)
        try:
            while True:
                message = await self._next(None, pump)
                if message is None or isinstance(message, Stop):
                    return
                opens = isinstance(message, OpenSession) or (
                    self.open_on_speech and isinstance(message, (SpeechStart, Utterance)))
                if not opens:
                    continue
                reason = await self._session(message, pump)
                if once or reason in (SessionEnd.STOP, SessionEnd.SOURCE_ENDED):
                    return
        finally:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            await self._close_output()
            self._set_state(SessionState.CLOSED)

    async def _next(self, timeout: float | None, pump: asyncio.Task) -> Inbox | None:
        """The next inbox message but the toy's own voice (`_own_voice_open`); None when the source ended (and nothing
        is left) or the timeout passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            message = await self._next_message(left, pump)
            if message is None or not self._own_voice(message):
                return message

    def _own_voice(self, message: Inbox) -> bool:
        """Whether `message` is the listener's account of speech judged the toy's own voice (and closes it when it
        is that speech's end)."""
        if not self._own_voice_open:
            return False
        if isinstance(message, SpeechStart):
            self._own_voice_open = False  # a new speech: the ignored one ended unreported (never the listener's way)
            return False
        if isinstance(message, (Utterance, UtteranceDiscarded)):
            self._own_voice_open = False
            if isinstance(message, Utterance) and message.text.strip():
                self.audit.record(AuditKind.VOICE_OWN_VOICE_DROPPED, turn=self._turns, text=message.text[:200])
            return True
        return isinstance(message, (EarlyTranscript, PartialTranscript))

    async def _next_message(self, timeout: float | None, pump: asyncio.Task) -> Inbox | None:
        if self._deferred:
            return self._deferred.pop(0)
        if not self.inbox.empty():
            return self.inbox.get_nowait()
        getter = asyncio.create_task(self.inbox.get(), name="voice:inbox")
        waiters = {getter} if pump.done() else {getter, pump}
        try:
            done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
                await asyncio.gather(getter, return_exceptions=True)
        if getter in done:
            return getter.result()
        if pump in done and self.inbox.empty():
            return None
        return None if not done else await self._next_message(timeout, pump)

    async def _open_output(self) -> None:
        if not self.sink_open:
            self.sink = self.new_sink()
            await self.sink.start()
            self.sink_open = True

    async def _close_output(self) -> None:
        if self.sink_open and self.sink is not None:
            self.sink_open = False
            with contextlib.suppress(Exception):
                await self.sink.aclose()

    async def _session(self, first: Inbox, pump: asyncio.Task) -> SessionEnd:
        """One audio session; returns why it closed."""
        self.sessions += 1
        self.runner = self.new_runner()
        reason = SessionEnd.CLOSED
        try:
            await self._open_output()
            if isinstance(first, OpenSession) and first.earcon and self.sink is not None:
                from ..audio.earcon import earcon_pcm  # numpy: only once a wake word was heard

                await self.sink.play(earcon_pcm(16000), 16000, f"earcon{self.sessions}")  # queued, not awaited
            self._set_state(SessionState.LISTENING)
            self.audit.record(AuditKind.VOICE_SESSION_OPENED, session_id=self.runner.conversation.session_id,
                              trigger=type(first).__name__, reason=getattr(first, "reason", None))
            pending: Inbox | None = first
            while True:
                if isinstance(pending, OpenSession) and pending.announce:
                    spoken = await self._announce(pending.announce)
                    if pending.done is not None and not pending.done.done():
                        pending.done.set_result(spoken)
                    pending = None
                if isinstance(pending, Utterance) and pending.text.strip():
                    outcome, pending = await self._turn(pending, pump)
                    if outcome == "terminated":
                        reason = SessionEnd.TERMINATED
                        return reason
                    self._set_state(SessionState.LISTENING)
                    if pending is not None:
                        continue
                message = await self._next(self.idle_timeout_s, pump)
                if message is None:
                    reason = SessionEnd.SOURCE_ENDED if self.source_ended.is_set() else SessionEnd.IDLE
                    return reason
                if isinstance(message, Stop):
                    reason = SessionEnd.STOP
                    return reason
                if isinstance(message, CloseSession):
                    reason = SessionEnd.CLOSED
                    return reason
                if isinstance(message, ListeningTimeout):
                    continue
                if isinstance(message, EarlyTranscript):
                    await self._speculate(message)
                    continue
                if _no_words(message) and self._went_on is not None:
                    pending = self._gone_nowhere()
                    continue
                pending = message
        finally:
            self._went_on = None
            await self.runner.drop_speculation("the session closed")
            self.audit.record(AuditKind.VOICE_SESSION_CLOSED, session_id=self.runner.conversation.session_id, reason=reason)
            self.runner.end_session()  # silence: a question left unanswered never runs its event later
            self._resume()
            if not self.keep_output_open:
                await self._close_output()  # the session releases the speaker; the mic goes back to idle VAD
            self._set_state(SessionState.IDLE)

    async def _speculate(self, early: EarlyTranscript) -> None:
        """Ask the model now when the turn will wait a while yet and is likely to be these words (not one that
        trails off: the child is probably going on)."""
        if (self.speculate and early.turn_class != "unfinished" and early.text
                and early.wait_ms - early.silent_ms >= SPECULATE_MIN_WAIT_MS):
            text = early.text if self._went_on is None else joined_text(self._went_on.utterance.text, early.text)
            await cast(TurnRunner, self.runner).speculate(text)

    def _gone_nowhere(self) -> Utterance | None:
        """The words the child went on with came to nothing (too short to be speech): the turn she went on from is
        answered after all if she heard none of its answer; otherwise what she heard is remembered, as after any
        barge-in, and the loop listens on."""
        went_on, self._went_on = cast(_WentOn, self._went_on), None
        if not went_on.heard:
            return went_on.utterance
        cast(TurnRunner, self.runner).remember_interrupted(went_on.utterance.text, went_on.heard)
        return None

    async def _announce(self, text: str) -> bool:
        """Speak a host-originated line (e.g. a reminder) in the open session, half-duplex; once spoken it is part of
        the session's conversation, so the child's reply to it is answered in context."""
        self._pause()
        speaker = TurnSpeaker(self.synthesizer, cast(AudioSink, self.sink), f"announce{self.sessions}",
                              clock=self.clock)
        try:
            self._set_state(SessionState.SPEAKING)
            await speaker.say(Speech(answer=Answer.FIRST, text=text, kind=SpeechKind.ANNOUNCEMENT))
            await speaker.finish()
            cast(TurnRunner, self.runner).conversation.add_announcement(text)
            return True
        except asyncio.CancelledError:
            await speaker.cancel()
            raise
        finally:
            self._resume()
            self._set_state(SessionState.LISTENING)

    async def _turn(self, utterance: Utterance, pump: asyncio.Task) -> tuple[str, Inbox | None]:
        """Run one spoken turn. Returns (outcome, an utterance that interrupted it)."""
        joins = None
        if self._went_on is not None:
            went, self._went_on = self._went_on, None
            if utterance.started_at <= went.resumed_at + SAME_SPEECH_S:  # what she said before and these are one turn
                joins = went.utterance.text
                utterance = dataclasses.replace(utterance, text=joined_text(joins, utterance.text))
            elif went.heard:
                cast(TurnRunner, self.runner).remember_interrupted(went.utterance.text, went.heard)
        self._turns += 1
        handoff = self.clock()
        end_of_speech = utterance.end_of_speech_clock
        record = VoiceTurnRecord(turn=self._turns, text=utterance.text, end_of_speech_at=end_of_speech,
                                 endpoint_at=utterance.decided_at - utterance.capture_lag_s,
                                 decided_at=utterance.decided_at, asr_final_at=utterance.asr_final_at,
                                 handoff_at=handoff, turn_end=utterance.turn_end, joins=joins)
        self._set_state(SessionState.THINKING)
        if self.on_item is not None:
            self.on_item(utterance)
        if not self.barge_in:
            self._pause()
        speaker = TurnSpeaker(self.synthesizer, cast(AudioSink, self.sink),
                              f"{cast(TurnRunner, self.runner).conversation.session_id}.u{self._turns}",
                              clock=self.clock)
        driver = asyncio.create_task(self._drive(utterance.text, speaker, record, since_speech_s=handoff - end_of_speech),
                                     name=f"voice:turn{self._turns}")
        interrupted_by: SpeechStart | Utterance | None = None
        try:
            if not self.barge_in:
                try:
                    await driver
                except Exception as exc:  # a broken engine or device must not take the voice loop down
                    self.audit.record(AuditKind.VOICE_TURN_FAILED, turn=self._turns, error=f"{type(exc).__name__}: {exc}")
                    await speaker.cancel()
            else:
                interrupted_by, verdict = await self._watch_for_barge_in(driver, pump, utterance, speaker)
                if interrupted_by is not None and not driver.done():
                    record.interrupted = True
                    driver.cancel()  # asked first, so no event starts while the audio stops
                    await speaker.cancel()  # playback stops within one block
                    stopped_at = self.clock()
                    await asyncio.gather(driver, return_exceptions=True)
                    heard = [s for s in speaker.heard(stopped_at) if s.kind != "holding"]
                    spoke_at = interrupted_by.at if isinstance(interrupted_by, SpeechStart) else interrupted_by.started_at
                    answer = speaker.marks.get(Answer.FIRST)
                    # a turn that acted stands: asked again as one with her next words, it would act twice
                    acted = cast(TurnRunner, self.runner).latest_turn_acted()
                    record.went_on = not acted and went_on(
                        first_ended_at=utterance.ended_at, resumed_at=spoke_at, window_s=self.resume_window_s,
                        answer_audio_at=None if answer is None else answer.first_audio_at)
                    if record.went_on:  # her sentence goes on: the next words join these, the answer is forgotten
                        cast(TurnRunner, self.runner).forget_cut_turn()
                        self._went_on = _WentOn(utterance, heard, spoke_at)
                        self.audit.record(AuditKind.VOICE_WENT_ON, turn=self._turns,
                                          after_ms=round((spoke_at - utterance.ended_at) * 1000))
                    else:  # only what was heard is remembered (nothing heard: nothing; the next words follow)
                        cast(TurnRunner, self.runner).remember_interrupted(utterance.text, heard)
                    record.heard = [s.text for s in heard]
                    record.barge_in_stop_ms = round((stopped_at - spoke_at) * 1000, 1)
                    judged = ({} if verdict is None else  # what the own-voice check saw: the case for a wrong stop
                              {"own_voice": round(verdict.score, 2), "window_ms": round(verdict.window_s * 1000),
                               "wary": verdict.wary})
                    self.audit.record(AuditKind.VOICE_BARGE_IN, turn=self._turns, stop_ms=record.barge_in_stop_ms,
                                      heard=record.heard, **judged)
        except asyncio.CancelledError:
            driver.cancel()
            await asyncio.gather(driver, return_exceptions=True)
            await speaker.cancel()
            raise
        finally:
            if not self.barge_in:
                self._resume()
            self._finish_record(record, speaker)
        return ("terminated" if record.terminated else "answered"), interrupted_by

    async def _watch_for_barge_in(self, driver: asyncio.Task, pump: asyncio.Task, utterance: Utterance,
                                  speaker: TurnSpeaker
                                  ) -> tuple[SpeechStart | Utterance | None, OwnVoiceVerdict | None]:
        """While the turn runs, user speech (SpeechStart or a new Utterance) interrupts it. Returns what
        interrupted it (None: nothing did) and the own-voice verdict on it, if it was judged. Before the toy speaks,
        a speech start that may go on with `utterance` (session/going_on.py) holds the answer's audio until the
        listener says what it was: words (they interrupt) or nothing (the answer plays)."""
        release_by = 0.0  # monotonic: while held, the answer plays at the latest then
        while not driver.done():
            getter = asyncio.create_task(self.inbox.get(), name="voice:barge-in")
            done, _ = await asyncio.wait({driver, getter}, return_when=asyncio.FIRST_COMPLETED,
                                         timeout=max(release_by - time.monotonic(), 0.0) if speaker.held else None)
            if not done:  # held, and the listener never said what the speech was: the answer plays
                speaker.release()
            if getter not in done:
                getter.cancel()
                await asyncio.gather(getter, return_exceptions=True)
                if not done:
                    continue
                break
            message = getter.result()
            if _no_words(message) and speaker.held:
                speaker.release()  # a cough, a breath: no words came
                continue
            if self._own_voice(message):
                continue  # the end of what the toy heard of itself, or words of it
            if isinstance(message, SpeechStart) and self.state is SessionState.SPEAKING:
                verdict = await self.own_voice.judge() if self.own_voice is not None else None
                if verdict is not None and verdict.own_voice:
                    self._own_voice_open = True
                    self.audit.record(AuditKind.VOICE_BARGE_IN_IGNORED, turn=self._turns,
                                      own_voice=round(verdict.score, 2), window_ms=round(verdict.window_s * 1000),
                                      learning=verdict.learning)
                    continue
                return message, verdict  # the utterance that follows arrives next and becomes the next turn
            if isinstance(message, SpeechStart) and went_on(first_ended_at=utterance.ended_at, resumed_at=message.at,
                                                            answer_audio_at=None, window_s=self.resume_window_s):
                if not speaker.held:
                    speaker.hold()  # still thinking, and she may be going on: the toy must not start over her
                    release_by = time.monotonic() + HOLD_LIMIT_S
                continue
            if isinstance(message, Utterance) and message.text.strip():
                return message, None
            if isinstance(message, (Stop, CloseSession, OpenSession)):
                # control messages are not user speech: let the turn finish, then handle them
                self._deferred.append(message)
        try:
            await driver
        except Exception as exc:
            self.audit.record(AuditKind.VOICE_TURN_FAILED, turn=self._turns, error=f"{type(exc).__name__}: {exc}")
        return None, None

    async def _drive(self, text: str, speaker: TurnSpeaker, record: VoiceTurnRecord, *,
                     since_speech_s: float = 0.0) -> None:
        end: TurnEnd | None = None
        first_speech = True
        try:
            # the holding cue and the turn deadline count from the end of the child's speech, not from here
            event = message_event(text, source="microphone",
                                  conversation_id=cast(TurnRunner, self.runner).conversation.session_id)
            # closed as the driver stops, even when a cancel lands outside the generator (in speaker.say): the
            # turn's producer has stopped, and no event starts, before the barge-in watcher looks at what it did
            items = cast(TurnRunner, self.runner).run(event, since_speech_s=max(since_speech_s, 0.0))
            async with contextlib.aclosing(items):
                async for item in items:
                    if self.on_item is not None:
                        self.on_item(item)
                    if isinstance(item, Speech):
                        if first_speech:
                            first_speech = False
                            self._set_state(SessionState.SPEAKING)
                        await speaker.say(item)
                    elif isinstance(item, EventOutcome):
                        record.events.append({"name": item.result.name, "status": item.result.status.value,
                                              "at": self.clock()})
                    elif isinstance(item, TurnEnd):
                        end = item
            await speaker.finish()  # the whole answer (a farewell too) plays to the end
        finally:
            if end is not None:
                record.turn_metrics = end.metrics
                record.terminated = end.terminated
                record.turn_id = end.turn_id

    def _finish_record(self, record: VoiceTurnRecord, speaker: TurnSpeaker) -> None:
        held, first, second = speaker.marks.get(0), speaker.marks.get(1), speaker.marks.get(2)
        if held is not None:
            record.holding_audio_at = held.first_audio_at
            record.spoken.extend(held.spoken)
        if first is not None:
            record.first_text_at = first.first_text_at
            record.first_clause_started_at = first.first_clause_started_at
            record.first_clause_synthesized_at = first.first_clause_synthesized_at
            record.first_audio_at = first.first_audio_at
            record.spoken.extend(first.spoken)
        if second is not None:
            record.second_first_audio_at = second.first_audio_at
            record.spoken.extend(second.spoken)
        self.records.append(record)
        if len(self.records) > MAX_RECORDS:
            del self.records[0]
        self.audit.record(AuditKind.VOICE_TURN, **record.as_audit())
        if self.on_turn is not None:
            self.on_turn(record)


async def deliver_host_event(loop: VoiceLoop, event: HostEvent, text: str | None,
                             timeout_s: float = 60.0) -> bool:
    """Open a session for a host event and speak `text` (e.g. a reminder); True once it was spoken."""
    done: asyncio.Future = asyncio.get_running_loop().create_future()
    if not loop.post(OpenSession(reason=event.event_type, announce=text, done=done)):
        return False
    try:
        return bool(await asyncio.wait_for(done, timeout=timeout_s))
    except TimeoutError:
        return False

