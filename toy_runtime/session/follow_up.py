"""Answer 2 of a turn: ONE aggregated follow-up ChatAgent call that words the results of the turn's events.

It can speak but never start events. Results reach it as quoted, untrusted evidence (prompts.results_message /
FOLLOW_UP_TOOL_NOTE) and stay out of the visible history: only what the toy said is remembered. In
`chat_agent_tools` mode the provider needs the first answer's tool calls answered, one tool message per call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from ..agent.chat_agent import ChatAgent, ReplyRecord, Segment
from ..agent.llm import CallStats, LLMFault
from ..agent.prompts import FOLLOW_UP_TOOL_NOTE, compact_results, language_note, results_message
from ..audit import AuditKind, AuditSink
from ..config import AgentConfig
from ..events import BatchOutcome, EventKernel, EventResult, not_run_lines
from ..language import guess_locale
from .conversation import Conversation
from .items import Answer, Speech, SpeechKind
from .turn_state import Turn

__all__ = ["FollowUp"]


@dataclass
class FollowUp:
    """The follow-up call of one turn, on that turn's model, kernel and history."""

    chat: ChatAgent
    kernel: EventKernel
    conversation: Conversation
    audit: AuditSink
    config: AgentConfig

    async def answer(self, turn: Turn, stats: CallStats, record: ReplyRecord, outcome: BatchOutcome) -> None:
        """Stream the follow-up into `turn.say`; a fault before its first words gets the fault line."""
        chat = self.chat
        text, turn_id = turn.text, turn.turn_id
        follow = outcome.continuation.follow_up
        compact = compact_results(follow, self.kernel.definitions)
        sources = _sources(follow)
        first_answer = " ".join(s.text for s in turn.spoken if s.answer == Answer.FIRST)
        history = self.conversation.messages + [{"role": "user", "content": text}]
        tools: list[dict[str, Any]] | None
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
            chat.audit_usage(stats, turn_id)
            # a follow-up round cannot start events: if it asked for one anyway, say it did not happen
            unrun = follow_record.ignored_events + follow_record.unrun_events
            for line in not_run_lines(unrun, self.kernel.registry.lookup, guess_locale(text)):
                turn.say(Speech(Answer.SECOND, line, kind=SpeechKind.CORRECTION))
        except LLMFault as exc:
            self.audit.record(AuditKind.LLM_FAULT, turn_id=turn_id, call="follow_up", code=exc.code,
                              message=exc.message)
            if first_segment:
                turn.say(Speech(Answer.SECOND, self.config.fault_line_for(guess_locale(text)), kind=SpeechKind.FAULT))
        self.audit.record(AuditKind.TURN_FOLLOW_UP, turn_id=turn_id, compact=compact,
                          raw=[r.result for r in follow])  # raw payloads stay in the audit only

    def _tool_protocol(self, record: ReplyRecord, outcome: BatchOutcome, first_answer: str) -> list[dict[str, Any]]:
        """chat_agent_tools: the provider-required assistant tool_calls + one tool message per call."""
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


def _sources(results: Sequence[EventResult]) -> tuple[dict[str, str], ...]:
    """Source titles/urls of follow-up results, for clients that can show them."""
    seen: dict[str, dict[str, str]] = {}
    for result in results:
        for hit in result.result.get("evidence", []) or []:
            url = hit.get("url")
            if url and url not in seen:
                seen[url] = {"title": hit.get("title", ""), "url": url}
    return tuple(seen.values())
