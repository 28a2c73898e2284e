"""ChatAgent: one streaming call that yields speakable segments and event requests as they appear.

Both invocation modes share the persona, history, sampling and output budget; only the event instruction and the
way events come out of the stream differ (a hidden text block vs native tool calls).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Literal

from ..events import AuditSink, EventRegistry, EventRequest, SourceProtocol
from .llm import CallStats, ChatClient, ContentDelta, ToolCallDeltas
from .prompts import catalog_instruction, tools_instruction
from .sentences import SpeechSplitter
from .text_events import EventBlock, TextEventParser, UnclosedBlock, Visible
from .tool_calls import AssembledCall, ToolCallAssembler

Mode = Literal["dual_agent", "chat_agent_tools"]


@dataclass(frozen=True)
class Segment:
    """A speakable piece of visible text (an early clause or a sentence)."""

    text: str
    at: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True)
class Detected:
    """An event request the moment it became complete in the stream."""

    request: EventRequest
    at: float = field(default_factory=time.perf_counter)


@dataclass
class ReplyRecord:
    """What one ChatAgent call produced, for history and provider follow-up messages."""

    visible: list[str] = field(default_factory=list)
    tool_calls: list[AssembledCall] = field(default_factory=list)
    event_ids: dict[str, str] = field(default_factory=dict)  # provider call id → our event id
    ignored_events: list[str] = field(default_factory=list)
    unclosed_events: list[str] = field(default_factory=list)  # names in a block that never closed: never run

    @property
    def text(self) -> str:
        return "".join(self.visible).strip()


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters and output budget, identical in both modes."""

    temperature: float
    top_p: float
    max_tokens: int

    def as_request(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}


class ChatAgent:
    """Builds ChatAgent requests and streams replies in the configured invocation mode."""

    def __init__(self, client: ChatClient, registry: EventRegistry, *, mode: Mode, model: str, persona: str,
                 sampling: Sampling, audit: AuditSink, first_clause_min_chars: int = 12) -> None:
        self.client = client
        self.registry = registry
        self.mode = mode
        self.model = model
        self.persona = persona
        self.sampling = sampling
        self.audit = audit
        self.first_clause_min_chars = first_clause_min_chars

    # -- prompts ------------------------------------------------------------------------------------

    def system_messages(self, *, events: bool) -> list[dict[str, Any]]:
        """Persona, plus the mode's event instruction when events are enabled."""
        messages = [{"role": "system", "content": self.persona}]
        if events and len(self.registry):
            instruction = catalog_instruction(self.registry) if self.mode == "dual_agent" else tools_instruction()
            messages.append({"role": "system", "content": instruction})
        return messages

    def tools(self, *, events: bool) -> list[dict[str, Any]] | None:
        """Provider tools: only in chat_agent_tools mode, never in dual_agent (tools=[] there)."""
        if self.mode == "chat_agent_tools" and events and len(self.registry):
            return self.registry.provider_tools()
        return None

    # -- streaming ----------------------------------------------------------------------------------

    async def stream(self, stats: CallStats, messages: list[dict[str, Any]], record: ReplyRecord, *, turn_id: str,
                     allow_events: bool, tools: list[dict[str, Any]] | None = None,
                     tool_choice: Any = None) -> AsyncIterator[Segment | Detected]:
        """Stream one reply: yield Segments as text arrives and Detected requests as soon as each completes.

        With allow_events False (a follow-up round), event blocks are still hidden and tool calls still parsed,
        but nothing is dispatched: search results must never trigger actions. Ignored names are audited.
        """
        splitter = SpeechSplitter(first_clause_min_chars=self.first_clause_min_chars)
        parser = TextEventParser() if self.mode == "dual_agent" else None
        assembler = ToolCallAssembler()

        def requests_from_names(names: tuple[str, ...]) -> list[Detected]:
            out = []
            for name in names:
                if not allow_events:
                    record.ignored_events.append(name)
                    self.audit.record("event.ignored", turn_id=turn_id, name=name, reason="follow-up round")
                    continue
                out.append(Detected(EventRequest(name=name, turn_id=turn_id, source=SourceProtocol.TEXT_EVENTS)))
            return out

        def requests_from_calls(calls: list[AssembledCall]) -> list[Detected]:
            out = []
            for call in calls:
                record.tool_calls.append(call)
                if not allow_events:
                    record.ignored_events.append(call.name)
                    self.audit.record("event.ignored", turn_id=turn_id, name=call.name, reason="follow-up round")
                    continue
                request = EventRequest(name=call.name, turn_id=turn_id, source=SourceProtocol.TOOL_CALLS,
                                       arguments=call.arguments, arguments_error=call.arguments_error)
                record.event_ids[call.call_id] = request.event_id
                out.append(Detected(request))
            return out

        def visible(text: str) -> list[Segment]:
            record.visible.append(text)
            return [Segment(s) for s in splitter.feed(text)]

        try:
            async for item in self.client.stream(stats, model=self.model, messages=messages,
                                                 tools=tools, tool_choice=tool_choice,
                                                 sampling=self.sampling.as_request()):
                if isinstance(item, ContentDelta):
                    if parser is None:
                        for segment in visible(item.text):
                            yield segment
                        continue
                    for parsed in parser.feed(item.text):
                        if isinstance(parsed, Visible):
                            for segment in visible(parsed.text):
                                yield segment
                        elif isinstance(parsed, EventBlock):
                            self.audit.record("chat.event_block", turn_id=turn_id, raw=parsed.raw)
                            for detected in requests_from_names(parsed.names):
                                yield detected
                elif isinstance(item, ToolCallDeltas):
                    for detected in requests_from_calls(assembler.feed(item.deltas)):
                        yield detected
        except BaseException:
            # a fault or cancellation: what was complete was already yielded; nothing partial is spoken or run
            if parser is not None and parser.in_block:
                self.audit.record("chat.unclosed_event_block", turn_id=turn_id, reason="stream aborted")
            if assembler.in_progress:
                self.audit.record("chat.incomplete_tool_call", turn_id=turn_id, fault=stats.fault)
            raise
        if parser is not None:
            for parsed in parser.close():
                if isinstance(parsed, Visible):
                    for segment in visible(parsed.text):
                        yield segment
                elif isinstance(parsed, UnclosedBlock):
                    self.audit.record("chat.unclosed_event_block", turn_id=turn_id, raw=parsed.raw,
                                      names=list(parsed.names))
                    record.unclosed_events.extend(parsed.names or ("",))  # "" = a block with no readable name
        for text in splitter.flush():
            yield Segment(text)
        for detected in requests_from_calls(assembler.finish()):
            yield detected
