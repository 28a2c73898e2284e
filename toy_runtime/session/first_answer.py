"""Answer 1 of a turn: the ChatAgent's stream, said as it arrives, its events dispatched the moment each completes.

Never silent and never stuck: one holding cue when nothing was said in time, and a hard deadline (holding.py).
When the child's words are nothing but clear requests the offline gate can carry out ("mute and bye"), a model that
sends no first token within `gate_first_token_s` of its request is abandoned and the gate acts at once.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable, cast

from ..agent.chat_agent import ChatAgent, Detected, ReplyRecord, Segment
from ..agent.llm import CallStats, LLMFault
from ..agent.prompts import language_note
from ..audit import AuditKind, AuditSink
from ..config import AgentConfig
from ..language import guess_locale
from .conversation import Conversation
from .gate import OfflineGate
from .holding import HoldingCues, TurnDeadline, answer_in_time
from .items import Answer, Speech, SpeechKind
from .turn_state import Turn

__all__ = ["FirstAnswer", "first_messages"]


def first_messages(chat: ChatAgent, conversation: Conversation, text: str) -> list[dict[str, Any]]:
    """The first answer's request messages for the child's `text` (a speculation sends the very same)."""
    # the language note right before the child's words: close to the end, where a small model follows it
    return chat.system_messages(events=True) + conversation.messages + [
        {"role": "system", "content": language_note(guess_locale(text))}, {"role": "user", "content": text}]


@dataclass
class FirstAnswer:
    """The first answer of one turn, on that turn's model and gate."""

    chat: ChatAgent
    conversation: Conversation
    gate: OfflineGate
    audit: AuditSink
    config: AgentConfig
    cues: HoldingCues
    monotonic: Callable[[], float]
    gate_first_token_s: float | None  # None: the gate never races the model's first token

    async def model_or_gate(self, turn: Turn, stats: CallStats, record: ReplyRecord, since_speech_s: float) -> bool:
        """The first answer; but when the whole utterance is clear gate requests ("mute and bye") and the model sent
        no first token within `gate_first_token_s` of its request, the call is abandoned and the gate carries the
        requests out and confirms them (reason "first_token_budget"). True when the gate acted.

        Nothing of the abandoned call can arrive later: it is cancelled, so no fault line follows either. The budget
        counts from `stats.started`, which moves past a first call's SDK import: the model is timed, not the runtime.
        """
        budget = self.gate_first_token_s
        watching = budget is not None and self.gate.covers(turn.context)
        answer = self._timed(turn, stats, record, since_speech_s, cue_ok=lambda: not watching)
        if not watching:
            await answer
            return False
        task = asyncio.ensure_future(answer)
        task.set_name(f"turn:{turn.turn_id}:model-or-gate")
        client = self.chat.client
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

    async def _timed(self, turn: Turn, stats: CallStats, record: ReplyRecord, since_speech_s: float,
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
            await answer_in_time(self._stream(turn, stats, record),
                                 cue_after_s=config.holding_cue_after_s - since_speech_s,
                                 deadline_s=config.turn_deadline_s - since_speech_s, on_cue=cue,
                                 monotonic=self.monotonic, name=f"turn:{turn.turn_id}:first-answer")
        except TurnDeadline as exc:
            stats.fault = "deadline"
            raise LLMFault("deadline", str(exc)) from None

    async def _stream(self, turn: Turn, stats: CallStats, record: ReplyRecord) -> None:
        chat = self.chat
        adopted = False
        async for item in chat.stream(stats, first_messages(chat, self.conversation, turn.text), record,
                                      turn_id=turn.turn_id, allow_events=True, tools=chat.tools(events=True)):
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
        chat.audit_usage(stats, turn.turn_id)
