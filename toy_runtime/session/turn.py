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
from typing import Any, AsyncIterator, Callable, Sequence, cast
from zoneinfo import ZoneInfo

from ..agent.chat_agent import ChatAgent, Detected, ReplyRecord, Segment
from ..agent.event_agent import EventAgent
from ..agent.llm import CallStats, LLMFault
from ..agent.prompts import FOLLOW_UP_TOOL_NOTE, compact_results, language_note, results_message
from ..agent.speakable import NO_RULES, speakable
from ..config import AgentConfig
from ..audit import AuditKind, AuditSink
from ..events import BatchOutcome, EventKernel, EventResult, ResolveContext, not_run_lines
from ..events.definition import NOT_ASKED
from ..host.envelope import HostEvent
from ..language import guess_locale
from ..metrics.turn_metrics import TurnMetrics
from ..ports.clock import Clock
from .confirmation import DEFAULT_TIMEOUT_S, Confirmations
from .conversation import Conversation
from .gate import OfflineGate
from .holding import HoldingCues, TurnDeadline, answer_in_time
from .items import Answer, EventOutcome, Speech, SpeechKind, TurnEnd, TurnItem
from .promises import PromiseCheck, claimed
from .turn_state import Turn, TurnPath

_DONE = object()
# kinds already cut by the streaming splitter (or short): said as they come, not cut again
_CUT_ALREADY = frozenset({SpeechKind.REPLY, SpeechKind.FOLLOW_UP, SpeechKind.HOLDING})


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

    @property
    def mode(self) -> str:
        return self.chat.mode if self.chat else "offline"

    async def run(self, event: HostEvent, *, since_speech_s: float = 0.0) -> AsyncIterator[TurnItem]:
        """Yield the turn's items in order of occurrence; the last one is TurnEnd.

        `since_speech_s`: how long ago the child stopped speaking (the voice loop knows; 0 for typed text). The
        holding cue and the turn deadline count from then.
        """
        queue: asyncio.Queue[Any] = asyncio.Queue()
        if self.before_turn is not None:
            self.before_turn(self)
        turn_id = self.conversation.next_turn_id()
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

        def say(speech: Speech) -> None:
            if speech.kind in _CUT_ALREADY:  # already cut by the streaming splitter, or short
                spoken.append(speech)
                emit(speech)
                return
            # whole template lines are cut the same way, so speech can start with their first clause
            # (an early first clause only for answer 1, where it decides how soon the child hears anything)
            # and pass the same speakable guard as model text
            early = self.config.first_clause_min_chars if speech.answer == Answer.FIRST else 0
            parts, hidden = speakable(speech.text, self.chat.speakable_rules if self.chat else NO_RULES,
                                      first_clause_min_chars=early, first_clause_min_chars_cjk=early)
            if hidden:
                self.audit.record(AuditKind.SPEECH_HIDDEN, turn_id=turn_id, speech_kind=speech.kind,
                                  hidden=[h.kind for h in hidden])
            for part in parts:
                piece = Speech(speech.answer, part, sources=speech.sources, kind=speech.kind, at=speech.at)
                spoken.append(piece)
                emit(piece)

        run = self.kernel.open_batch(conv.session_id, turn_id, context,
                                     on_result=lambda result: emit(EventOutcome(result)))
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
                    if await self._model_or_gate(turn, cast(CallStats, first), record, since_speech_s):
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
                await self._follow_up(turn, second, record, outcome)
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

        self._remember(turn, outcome.results)
        measured = self._metrics(turn, first, second, outcome)
        metrics = measured.as_dict()
        self.audit.record(AuditKind.TURN_COMPLETED, turn_id=turn_id, terminated=terminated, **metrics)
        emit(TurnEnd(turn_id=turn_id, llm_calls=measured.llm_calls, terminated=terminated, metrics=metrics))

    async def _model_or_gate(self, turn: Turn, stats: CallStats, record: ReplyRecord, since_speech_s: float) -> bool:
        """The first answer; but when the whole utterance is clear gate requests ("mute and bye") and the model sent
        no first token within `gate_first_token_s` of its request, the call is abandoned and the gate carries the
        requests out and confirms them (reason "first_token_budget"). True when the gate acted.

        Nothing of the abandoned call can arrive later: it is cancelled, so no fault line follows either. The budget
        counts from `stats.started`, which moves past a first call's SDK import: the model is timed, not the runtime.
        """
        budget = self.gate_first_token_s
        watching = budget is not None and self.gate.covers(turn.context)
        answer = self._timed_first_answer(turn, stats, record, since_speech_s, cue_ok=lambda: not watching)
        if not watching:
            await answer
            return False
        task = asyncio.ensure_future(answer)
        task.set_name(f"turn:{turn.turn_id}:model-or-gate")
        client = cast(ChatAgent, self.chat).client
        try:
            while True:
                left = stats.started + cast(float, budget) - time.perf_counter()
                # left ≤ 0 only while the SDK is still being imported: the model has not been asked yet, look again
                # a budget later (when the import ends, `stats.started` moves to the request)
                done, _ = await asyncio.wait({task}, timeout=left if left > 0 else budget)
                if done:
                    watching = False
                    task.result()  # an LLMFault goes to the caller's fault path
                    return False
                if stats.first_content_at is not None or stats.first_tool_call_at is not None:
                    watching = False  # the model is answering: the usual cue and deadline apply
                    await task
                    return False
                if getattr(client, "ready", True) and time.perf_counter() >= stats.started + cast(float, budget):
                    break
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        stats.fault = "first_token_budget"
        self.audit.record(AuditKind.LLM_FAULT, turn_id=turn.turn_id, call="chat_agent", code=stats.fault,
                          message=f"no first token within gate_first_token_s = {budget:g} s; the gate acted")
        self.gate.step_in(turn, reason=stats.fault)
        return True

    async def _timed_first_answer(self, turn: Turn, stats: CallStats, record: ReplyRecord, since_speech_s: float,
                                  cue_ok: Callable[[], bool] = lambda: True) -> None:
        """The first answer, with one holding cue when nothing was said in time and a hard deadline.
        `cue_ok` False at the cue's moment skips it (the gate may answer instead)."""
        def cue() -> None:
            if not turn.spoken and cue_ok():
                cue_text = self.cues.pick(turn.locale)
                self.audit.record(AuditKind.TURN_HOLDING_CUE, turn_id=turn.turn_id, text=cue_text)
                turn.say(Speech(Answer.HOLDING, cue_text, kind=SpeechKind.HOLDING))

        config = self.config
        try:
            await answer_in_time(self._first_answer(turn, stats, record),
                                 cue_after_s=config.holding_cue_after_s - since_speech_s,
                                 deadline_s=config.turn_deadline_s - since_speech_s, on_cue=cue,
                                 monotonic=self.clock.monotonic, name=f"turn:{turn.turn_id}:first-answer")
        except TurnDeadline as exc:
            stats.fault = "deadline"
            raise LLMFault("deadline", str(exc)) from None

    def _first_messages(self, text: str) -> list[dict[str, Any]]:
        """The first answer's request messages for the child's `text` (a speculation sends the very same)."""
        # the language note right before the child's words: close to the end, where a small model follows it
        return cast(ChatAgent, self.chat).system_messages(events=True) + self.conversation.messages + [
            {"role": "system", "content": language_note(guess_locale(text))}, {"role": "user", "content": text}]

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

        sent = await self.chat.prefetch(self._first_messages(text), tools=self.chat.tools(events=True),
                                        on_cancel=cancelled)
        if sent:
            self.audit.record(AuditKind.LLM_SPECULATION, outcome="started", text=text)
        return sent

    async def drop_speculation(self, reason: str) -> bool:
        """Cancel a speculation that no turn adopted (the child went on, the session closed); audited as such."""
        return self.chat is not None and await self.chat.client.cancel_prefetch(reason)

    async def _first_answer(self, turn: Turn, stats: CallStats, record: ReplyRecord) -> None:
        chat = cast(ChatAgent, self.chat)
        messages = self._first_messages(turn.text)
        adopted = False
        async for item in chat.stream(stats, messages, record, turn_id=turn.turn_id, allow_events=True,
                                      tools=chat.tools(events=True)):
            if not adopted and stats.prefetched_ms is not None:
                adopted = True
                self.audit.record(AuditKind.LLM_SPECULATION, turn_id=turn.turn_id, outcome="adopted",
                                  ahead_ms=round(stats.prefetched_ms, 1))
            if isinstance(item, Segment):
                turn.say(Speech(Answer.FIRST, item.text, at=item.at))
            elif isinstance(item, Detected):
                turn.run.add(item.request, detected_at=item.at)
                # yield once so the event starts now, even when more stream data is already buffered
                await asyncio.sleep(0)
        self._audit_usage(stats, turn.turn_id)

    async def _follow_up(self, turn: Turn, stats: CallStats, record: ReplyRecord, outcome: BatchOutcome) -> None:
        """ONE aggregated follow-up call; it can speak but never start events.

        Results reach it as quoted, untrusted evidence (prompts.results_message / FOLLOW_UP_TOOL_NOTE) and stay out
        of the visible history: only what the toy said is remembered.
        """
        chat = cast(ChatAgent, self.chat)
        text, turn_id = turn.text, turn.turn_id
        definitions = self.kernel.definitions
        follow = outcome.continuation.follow_up
        compact = compact_results(follow, definitions)
        sources = _sources(follow)
        first_answer = " ".join(s.text for s in turn.spoken if s.answer == Answer.FIRST)
        history = self.conversation.messages + [{"role": "user", "content": text}]
        # a confirmed event ran on the child's yes, not on a call of this turn: there is no tool call to answer
        if chat.mode == "dual_agent" or not record.tool_calls:
            messages = chat.system_messages(events=False) + history + [
                {"role": "assistant", "content": first_answer or "Let me check."},
                {"role": "user", "content": results_message(compact)},
            ]
            tools, tool_choice = None, None
        else:
            messages = chat.system_messages(events=True) + history + self._tool_protocol(record, outcome,
                                                                                        first_answer)
            messages.append({"role": "system", "content": FOLLOW_UP_TOOL_NOTE})
            tools, tool_choice = chat.tools(events=True), "none"
        messages.insert(len(messages) - 1, {"role": "system", "content": language_note(guess_locale(text))})
        follow_record = ReplyRecord()
        first_segment = True
        try:
            async for item in chat.stream(stats, messages, follow_record, turn_id=turn_id, allow_events=False,
                                          tools=tools, tool_choice=tool_choice):
                if isinstance(item, Segment):
                    turn.say(Speech(Answer.SECOND, item.text, sources=sources if first_segment else (),
                                    kind=SpeechKind.FOLLOW_UP, at=item.at))
                    first_segment = False
            self._audit_usage(stats, turn_id)
            # a follow-up round cannot start events: if it asked for one anyway, say it did not happen
            unrun = follow_record.ignored_events + follow_record.unrun_events
            for line in not_run_lines(unrun, self.kernel.registry.lookup, guess_locale(text)):
                turn.say(Speech(Answer.SECOND, line, kind=SpeechKind.CORRECTION))
        except LLMFault as exc:
            self.audit.record(AuditKind.LLM_FAULT, turn_id=turn_id, call="follow_up", code=exc.code, message=exc.message)
            if first_segment:
                turn.say(Speech(Answer.SECOND, self.config.fault_line_for(guess_locale(text)), kind=SpeechKind.FAULT))
        self.audit.record(AuditKind.TURN_FOLLOW_UP, turn_id=turn_id, compact=compact,
                          raw=[r.result for r in follow])  # raw payloads stay in the audit only

    def _tool_protocol(self, record: ReplyRecord, outcome: BatchOutcome, first_answer: str) -> list[dict[str, Any]]:
        """chat_agent_tools: the provider-required assistant tool_calls + one tool message per call."""
        import json

        by_event = {r.event_id: r for r in outcome.results}
        calls = [{"id": c.call_id, "type": "function",
                  "function": {"name": c.name, "arguments": json.dumps(c.arguments or {}, ensure_ascii=False)}}
                 for c in record.tool_calls]
        messages: list[dict[str, Any]] = [{"role": "assistant", "content": first_answer, "tool_calls": calls}]
        for call in record.tool_calls:
            result = by_event.get(record.event_ids.get(call.call_id, ""))
            body = (compact_results([result], self.kernel.definitions)[0] if result is not None
                    else {"status": "rejected", "error": "unknown tool"})
            messages.append({"role": "tool", "tool_call_id": call.call_id,
                             "content": json.dumps(body, ensure_ascii=False)})
        return messages

    def remember_interrupted(self, text: str, heard: Sequence[Speech]) -> None:
        """A turn the child cut off (barge-in): its words and only what the toy had said out loud by then enter the
        history, so the next answer neither repeats the unheard rest nor builds on it as if it had been said."""
        self.conversation.add("user", text)
        self.conversation.add("assistant", " ".join(s.text for s in heard if s.kind != SpeechKind.HOLDING))

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

    def _audit_usage(self, stats: CallStats, turn_id: str) -> None:
        if stats.usage_source != "provider" and self.chat is not None and self.chat.client.include_usage:
            self.audit.record(AuditKind.LLM_USAGE_MISSING, turn_id=turn_id, call=stats.purpose,
                              estimated_prompt_tokens=stats.prompt_tokens,
                              estimated_completion_tokens=stats.completion_tokens)

    def _remember(self, turn: Turn, results: Sequence[EventResult]) -> None:
        """What the child said and, as one message, everything the toy said, with the mode's record of the turn's events.

        Event results (search snippets above all) are never stored: they are untrusted outside text, and the
        history feeds later prompts, EventAgent's among them. One assistant message also keeps the roles
        alternating, which some local chat templates require.
        """
        conv = self.conversation
        conv.add("user", turn.text)
        # the turn's events stay in ChatAgent's history in the mode's own form (a block, or calls with a status), so
        # a small model keeps seeing the form it is asked to write (results are never kept)
        # a request refused as not asked is left out: a small model shown its own unasked goodbye would repeat it
        results = [r for r in results if r.error_code != NOT_ASKED]
        block = self.chat.history_block([r.name for r in results]) if self.chat is not None else ""
        calls = self.chat.history_calls(results, turn.turn_id) if self.chat is not None else []
        conv.add("assistant", " ".join(s.text for s in turn.spoken if s.kind != SpeechKind.HOLDING), protocol=block,
                 calls=calls)

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


def _sources(results) -> tuple[dict[str, str], ...]:
    """Source titles/urls of follow-up results, for clients that can show them."""
    seen: dict[str, dict[str, str]] = {}
    for result in results:
        for hit in result.result.get("evidence", []) or []:
            url = hit.get("url")
            if url and url not in seen:
                seen[url] = {"title": hit.get("title", ""), "url": url}
    return tuple(seen.values())
