"""One conversation turn: host event → ChatAgent stream → speech + events → kernel → continuation → follow-up.

Answer 1 streams out as it arrives; each event is dispatched to the kernel the moment it is complete in the
stream and never delays the visible text. The kernel's continuation decides what follows: deterministic lines, at
most one aggregated follow-up ChatAgent call, or the end of the session.

Every fault still ends in a useful turn: a late first answer gets one holding cue, a failed or abandoned ChatAgent
call hands the utterance to the offline gate (clear requests are carried out, anything else hears the fault line),
and an action the model asked for that never ran gets a short truthful correction. When the child's words are
nothing but clear requests the gate can carry out ("mute and bye"), a model that sends no first token within
`gate_first_token_s` of the request is abandoned and the gate acts at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, AsyncGenerator, Callable, Sequence, cast
from zoneinfo import ZoneInfo

from ..agent.chat_agent import ChatAgent, ReplyRecord
from ..agent.event_agent import EventAgent
from ..agent.llm import CallStats, LLMFault
from ..agent.speakable import NO_RULES
from ..config import AgentConfig
from ..audit import AuditKind, AuditSink
from ..events import BatchOutcome, BatchRun, EventKernel, ResolveContext, not_run_lines
from ..host.envelope import HostEvent
from ..language import guess_locale
from ..metrics.turn_metrics import TurnMetrics
from ..ports.clock import Clock
from .confirmation import DEFAULT_TIMEOUT_S, Confirmations
from .conversation import Conversation
from .gate import OfflineGate
from .first_answer import FirstAnswer, first_messages
from .follow_up import FollowUp
from .holding import HoldingCues
from .items import Answer, EventOutcome, Speech, SpeechKind, TurnEnd, TurnItem
from .promises import PromiseCheck, claimed
from .turn_memory import remember_interrupted, remember_turn
from .turn_speech import turn_speech
from .turn_state import Turn, TurnPath

_DONE = object()


class TurnRunner:
    """Runs `message.received` turns for one conversation."""

    def __init__(self, *, kernel: EventKernel, chat_agent: ChatAgent | None, conversation: Conversation,
                 audit: AuditSink, clock: Clock, timezone: str, agent_config: AgentConfig,
                 event_agent: EventAgent | None = None, rng: random.Random | None = None,
                 gate_first_token_s: float | None = None, confirmation_timeout_s: float = DEFAULT_TIMEOUT_S,
                 observer: Callable[[str, TurnItem], None] | None = None,
                 before_turn: Callable[["TurnRunner"], None] | None = None) -> None:
        self.kernel = kernel
        self.chat = chat_agent
        self.conversation = conversation
        self.audit = audit
        self.clock = clock
        self.timezone = timezone
        self.config = agent_config
        self.event_agent = event_agent
        self.gate = OfflineGate(kernel.registry, audit)
        # events held for the child's yes, settled by the next turn (session/confirmation.py)
        self.confirmations = Confirmations(kernel.registry, audit, timeout_s=confirmation_timeout_s)
        # None: the gate never races the model's first token (it still steps in after a fault)
        self.gate_first_token_s = gate_first_token_s
        self.cues = HoldingCues({"en": agent_config.holding_cues, "zh": agent_config.holding_cues_zh}, rng)
        self.observer = observer  # sees each item as it is produced (the debug console); must not block
        self.before_turn = before_turn  # may swap chat/kernel/gate for the next turn (the console's overrides)
        self._batch: BatchRun | None = None  # the latest turn's events: did a cut turn already act?

    @property
    def mode(self) -> str:
        return self.chat.mode if self.chat else "offline"

    async def run(self, event: HostEvent, *, since_speech_s: float = 0.0) -> AsyncGenerator[TurnItem, None]:
        """Yield the turn's items in order of occurrence; the last one is TurnEnd.

        `since_speech_s`: how long ago the child stopped speaking (the voice loop knows; 0 for typed text). The
        holding cue and the turn deadline count from then.
        """
        queue: asyncio.Queue[Any] = asyncio.Queue()
        if self.before_turn is not None:
            self.before_turn(self)
        turn_id = self.conversation.next_turn_id()
        self._batch = None  # until this turn opens its own: an earlier turn's events are not this one's
        producer = asyncio.create_task(self._produce(event, turn_id, queue, since_speech_s), name=f"turn:{turn_id}")
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    break
                yield item
            await producer  # surface a bug in the producer instead of hiding it
        finally:
            if not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)
            # a speculation this turn did not take (it answered from the gate, or settled a confirmation)
            await self.drop_speculation("the turn did not ask the model the same")

    # -- the turn ------------------------------------------------------------------------------------

    async def _produce(self, event: HostEvent, turn_id: str, queue: asyncio.Queue, since_speech_s: float) -> None:
        try:
            emit = queue.put_nowait
            if self.observer is not None:
                observer = self.observer

                def emit(item: TurnItem) -> None:
                    observer(turn_id, item)
                    queue.put_nowait(item)
            await self._turn(event, turn_id, emit, since_speech_s)
        finally:
            queue.put_nowait(_DONE)

    async def _turn(self, event: HostEvent, turn_id: str, emit, since_speech_s: float = 0.0) -> None:
        started = time.perf_counter()
        text = (event.input.text or "").strip()
        conv = self.conversation
        context = ResolveContext(
            utterance=text,
            request_time=self.clock.now().astimezone(ZoneInfo(self.timezone)),
            timezone=self.timezone,
            history=conv.slice_for_events(),
            locale=guess_locale(text),
        )
        self.audit.record(AuditKind.TURN_STARTED, turn_id=turn_id, host_event_id=event.event_id, event_type=event.event_type,
                          mode=self.mode, text=text)
        spoken: list[Speech] = []

        say = turn_speech(emit, spoken, rules=self.chat.speakable_rules if self.chat else NO_RULES, audit=self.audit,
                          turn_id=turn_id, first_clause_min_chars=self.config.first_clause_min_chars)
        run = self.kernel.open_batch(conv.session_id, turn_id, context,
                                     on_result=lambda result: emit(EventOutcome(result)))
        self._batch = run
        turn = Turn(turn_id, context, run, say, spoken, started)
        record = ReplyRecord()
        first = CallStats(purpose="chat_agent") if self.chat else None
        unrun: list[str] = []
        # a yes or no to the previous turn's question is answered here, without the model
        reply = self.confirmations.take(text, turn_id, self.clock.monotonic())
        try:
            if reply is not None:
                turn.path, first = TurnPath.CONFIRMATION, None
                reply.act(run, turn_id, say, context.locale)
            elif (self.chat is None or (self.config.gate_shortcut and self.gate.matches(context))
                    or self._asks_for_unoffered(context)):
                turn.path = TurnPath.GATE
                first = None
                self.gate.answer(turn, self.config.offline_line_for(context.locale))
            else:
                try:
                    if await self._first_answer().model_or_gate(turn, cast(CallStats, first), record, since_speech_s):
                        turn.path, turn.fault = TurnPath.GATE, cast(CallStats, first).fault
                    # the model asked for something that cannot run: the child's clear words still count
                    elif unrun := list(run.dropped) + record.unrun_events:
                        self.audit.record(AuditKind.TURN_NOT_RUN, turn_id=turn_id, names=unrun)
                        if self.gate.step_in(turn, reason="not_run"):
                            turn.path, unrun = TurnPath.GATE, []
                    # the model answered but did not mark a request the words make clear: it happens anyway, and
                    # the model's claim of it stays true (issue 27); the model's own path and follow-up stand
                    elif self.gate.omitted(turn):
                        self.gate.step_in(turn, reason="unmarked", said=claimed(spoken, self.kernel.registry))
                except LLMFault as exc:
                    turn.fault = exc.code
                    self.audit.record(AuditKind.LLM_FAULT, turn_id=turn_id, call="chat_agent", code=exc.code,
                                      message=exc.message)
                    turn.path = self.gate.after_fault(exc, turn,
                                                      fault_line=self.config.fault_line_for(context.locale),
                                                      offline_line=self.config.offline_line_for(context.locale))
        except asyncio.CancelledError:
            run.abort()  # a discarded turn never runs events that have not started
            raise
        finally:
            run.close()
        try:
            outcome = await run.wait()
        except asyncio.CancelledError:
            run.abort()
            raise

        for line in outcome.continuation.lines:
            say(Speech(Answer.SECOND, line, kind=SpeechKind.CONTINUATION))
        # after a fault or a gate step-in, the gate or the fault line already said what happened; a name that also
        # came through properly (a block and a text call for the same event) did run and needs no correction
        ran = {r.name for r in outcome.results}
        unrun = [n for n in unrun if (d := self.kernel.registry.lookup(n)) is None or d.name not in ran]
        corrections = not_run_lines(unrun if turn.fault is None else [], self.kernel.registry.lookup, context.locale)
        for line in corrections:
            say(Speech(Answer.SECOND, line, kind=SpeechKind.CORRECTION))
        # a claim in the model's words ("I've set a reminder", "Bye!") that no event backs: audited, and corrected
        # unless a fault or a not-run line already told the child it did not happen
        promises = PromiseCheck(self.kernel.registry, self.audit)  # this turn's kernel (the console may swap it)
        unbacked = promises.unbacked(spoken, outcome.results, turn_id)
        if turn.fault is None and not corrections:
            for line in promises.corrections(unbacked, context.locale):
                say(Speech(Answer.SECOND, line, kind=SpeechKind.CORRECTION))
        second: CallStats | None = None
        if outcome.continuation.needs_llm:
            # a confirmed event's result is worded too
            if self.chat is not None and turn.path in (TurnPath.LLM, TurnPath.CONFIRMATION):
                second = CallStats(purpose="follow_up")
                await FollowUp(self.chat, self.kernel, conv, self.audit, self.config).answer(turn, second, record,
                                                                                             outcome)
            else:
                say(Speech(Answer.SECOND, self.config.offline_line_for(context.locale), kind=SpeechKind.OFFLINE))
        if turn.path == TurnPath.CONFIRMATION:  # a confirmed event that ran unannounced is said to be done
            self.confirmations.say_done(outcome.results, spoken, say, context.locale)
        if not turn.replied:  # never a silent turn
            self.gate.confirm_silent(turn, outcome.results, self.config.fault_line_for(context.locale))
        terminated = outcome.continuation.terminate
        self.confirmations.note(outcome.results, turn_id, self.clock.monotonic())
        if terminated:
            conv.terminated = True
            self.confirmations.cancel("session_ended", turn_id)

        remember_turn(conv, self.chat, turn, outcome.results)
        measured = self._metrics(turn, first, second, outcome)
        metrics = measured.as_dict()
        self.audit.record(AuditKind.TURN_COMPLETED, turn_id=turn_id, terminated=terminated, **metrics)
        emit(TurnEnd(turn_id=turn_id, llm_calls=measured.llm_calls, terminated=terminated, metrics=metrics))

    async def speculate(self, text: str) -> bool:
        """Send the first answer's request for `text` now, while the toy waits to be sure the child has finished
        (agent/prefetch.py): if the turn comes with these words, its answer is already on its way; otherwise it
        is cancelled unread. False when there is no model to ask, or nothing to ask it."""
        text = text.strip()
        if self.chat is None or not text or self.confirmations.held:
            return False
        if self.before_turn is not None:
            return False  # the console may swap the model before the turn: the request is not known yet
        def cancelled(reason: str) -> None:
            self.audit.record(AuditKind.LLM_SPECULATION, outcome="cancelled", reason=reason, text=text)

        sent = await self.chat.prefetch(first_messages(self.chat, self.conversation, text),
                                        tools=self.chat.tools(events=True), on_cancel=cancelled)
        if sent:
            self.audit.record(AuditKind.LLM_SPECULATION, outcome="started", text=text)
        return sent

    async def drop_speculation(self, reason: str) -> bool:
        """Cancel a speculation that no turn adopted (the child went on, the session closed); audited as such."""
        return self.chat is not None and await self.chat.client.cancel_prefetch(reason)

    def _first_answer(self) -> FirstAnswer:
        """Answer 1 on this turn's model and gate (the console may swap them between turns)."""
        return FirstAnswer(cast(ChatAgent, self.chat), self.conversation, self.gate, self.audit, self.config, self.cues,
                           self.clock.monotonic, self.gate_first_token_s)

    def remember_interrupted(self, text: str, heard: Sequence[Speech]) -> None:
        """A turn the child cut off (barge-in): only what the toy had said out loud by then is remembered, and the
        events it had already started (they stand: the next answer must know the music is already quieter)."""
        acted = self._batch.acted if self._batch is not None else []
        block, calls = "", []
        if self.chat is not None and acted:
            block = self.chat.history_block([name for name, _, _ in acted])
            calls = self.chat.history_started(acted, cast(BatchRun, self._batch).turn_id)
        remember_interrupted(self.conversation, text, heard, protocol=block, calls=calls)

    def latest_turn_acted(self) -> bool:
        """Whether the latest turn started an action (a handler that is not read-only was called, even if its
        result never reached the turn): a turn that acted stands, and the child's next words cannot be asked again
        as one with it (the action would run twice; a search run twice harms nothing)."""
        return self._batch is not None and self._batch.changed_something

    def forget_cut_turn(self) -> None:
        """The turn just cut off is not a turn of its own (the child went on with it): if its model had finished and
        it was remembered, it leaves the history (session/going_on.py: it ran no event)."""
        self.conversation.cut_reply(self.conversation.current_turn_id, "")

    def end_session(self, reason: str = "session_ended") -> None:
        """The conversation is over (idle, closed, stopped): whatever still waits for the child's yes is dropped."""
        self.confirmations.cancel(reason)

    # -- offline gate --------------------------------------------------------------------------------

    def _asks_for_unoffered(self, context: ResolveContext) -> bool:
        """The child clearly asked for something the model is not offered (web search with no provider): the gate
        answers it truthfully at once, instead of a model that may promise what it cannot do."""
        return any(not d.advertised and d.gate_match is not None and d.gate_match(context)
                   for d in self.kernel.registry)

    # -- bookkeeping ---------------------------------------------------------------------------------

    def _metrics(self, turn: Turn, first: CallStats | None, second: CallStats | None,
                 outcome: BatchOutcome) -> TurnMetrics:
        spoken = turn.spoken
        return TurnMetrics.measure(
            mode=self.mode, path=turn.path, fault=turn.fault, started=turn.started, now=time.perf_counter(),
            first=first, second=second,
            # by turn id: another conversation's EventAgent calls made meanwhile are not this turn's
            agent_calls=self.event_agent.take_calls(turn.turn_id) if self.event_agent else [],
            outcome=outcome,
            first_speech_at=next((s.at for s in spoken if s.kind != SpeechKind.HOLDING), None),
            holding_at=next((s.at for s in spoken if s.kind == SpeechKind.HOLDING), None),
            second_speech_at=next((s.at for s in spoken if s.answer == Answer.SECOND), None))

