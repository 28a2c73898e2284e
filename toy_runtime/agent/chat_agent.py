"""ChatAgent: one streaming call that yields speakable segments and event requests as they appear.

Both invocation modes share the persona, history, sampling and output budget; only the event instruction and the
way events come out of the stream differ (a hidden text block vs native tool calls).

Every piece of visible text passes the speakable guard (`speakable.py`) before it becomes a Segment. A tool call the
model wrote into its content is recovered in chat_agent_tools (through the same argument rules and kernel checks as a
native call) and hidden and audited in dual_agent. A reply cut by the token limit ends at its last whole sentence.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Literal, Sequence

from ..audit import AuditKind, AuditSink
from ..events import EventRegistry, EventRequest, EventResult, SourceProtocol
from ..ports.llm import CallStats, ChatStream, ContentDelta, ToolCallDeltas
from .markup import Hidden
from .prompts import (
    CLOSE,
    EXAMPLES_HEADER,
    OPEN,
    FOLLOW_UP_TOOL_NOTE,
    LANGUAGE_NOTES,
    catalog_instruction,
    example_lines,
    reads_back_an_example,
    results_message,
    tools_instruction,
)
from .speakable import SpeakableGuard, SpeakableRules, reason
from .text_events import EventBlock, TextEventParser, UnclosedBlock, Visible
from .tool_calls import AssembledCall, HistoryCall, ToolCallAssembler, calls_from_text

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

    visible: list[str] = field(default_factory=list)  # the spoken segments, after the speakable guard
    tool_calls: list[AssembledCall] = field(default_factory=list)
    event_ids: dict[str, str] = field(default_factory=dict)  # provider call id → our event id
    ignored_events: list[str] = field(default_factory=list)
    # named but never run: in a block that never closed, or in a tool call written as text in dual_agent
    unrun_events: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.visible).strip()


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

    def __init__(self, client: ChatStream, registry: EventRegistry, *, mode: Mode, model: str, persona: str,
                 sampling: Sampling, audit: AuditSink, first_clause_min_chars: int = 12,
                 tools_reply_first: bool = False) -> None:
        self.client = client
        self.registry = registry
        self.mode = mode
        self.model = model
        self.persona = persona
        self.sampling = sampling
        self.audit = audit
        self.first_clause_min_chars = first_clause_min_chars
        self.tools_reply_first = tools_reply_first
        self.speakable_rules = speakable_rules(registry, persona)

    # -- prompts ------------------------------------------------------------------------------------

    def system_messages(self, *, events: bool) -> list[dict[str, Any]]:
        """Persona, plus the mode's event instruction when events are enabled."""
        messages = [{"role": "system", "content": self.persona}]
        if events and len(self.registry):
            instruction = (catalog_instruction(self.registry) if self.mode == "dual_agent"
                           else tools_instruction(reply_first=self.tools_reply_first))
            messages.append({"role": "system", "content": instruction})
        return messages

    def history_block(self, names: list[str]) -> str:
        """dual_agent: the block of a turn's events, kept after the reply in ChatAgent's own history (never spoken,
        never in the EventAgent's slice). Issue 17: a 1.5B model that saw its earlier answers without a block
        stopped writing one (recall 18/23 on first turns, 17/74 on later ones)."""
        names = list(dict.fromkeys(names))
        return f"{OPEN}{', '.join(names)}{CLOSE}" if self.mode == "dual_agent" and names else ""

    def history_calls(self, results: Sequence[EventResult], turn_id: str) -> list[HistoryCall]:
        """chat_agent_tools: a turn's events as the tool calls that stand for them, kept in ChatAgent's own history
        with their status only (never their results: those are untrusted outside text). The direct-mode twin of
        `history_block`: a small model that sees its earlier answers without calls stops calling (issue 17)."""
        return self._history_calls([(r.name, dict(r.arguments), r.status.value) for r in results], turn_id)

    def history_started(self, started: Sequence[tuple[str, dict[str, Any], str]], turn_id: str) -> list[HistoryCall]:
        """chat_agent_tools: events a cut-off turn had started, (name, arguments, status), kept as calls with that
        status ("started" while the handler still ran; their results never reached the turn)."""
        return self._history_calls(list(started), turn_id)

    def _history_calls(self, entries: Sequence[tuple[str, dict[str, Any], str]], turn_id: str) -> list[HistoryCall]:
        if self.mode != "chat_agent_tools":
            return []
        calls = []
        for index, (name, arguments, status) in enumerate(entries):
            definition = self.registry.lookup(name)
            if definition is not None and definition.advertised:
                calls.append(HistoryCall(f"call_{turn_id.replace('.', '_')}_{index}", definition.tool_name,
                                         arguments, status))
        return calls

    def tools(self, *, events: bool) -> list[dict[str, Any]] | None:
        """Provider tools: only in chat_agent_tools mode, never in dual_agent (tools=[] there)."""
        if self.mode == "chat_agent_tools" and events and len(self.registry):
            return self.registry.provider_tools()
        return None

    def audit_usage(self, stats: CallStats, turn_id: str) -> None:
        """After a finished call: a provider that reported no token usage (when it was asked to) is audited, with
        the estimate that stands in for it."""
        if stats.usage_source != "provider" and self.client.include_usage:
            self.audit.record(AuditKind.LLM_USAGE_MISSING, turn_id=turn_id, call=stats.purpose,
                              estimated_prompt_tokens=stats.prompt_tokens,
                              estimated_completion_tokens=stats.completion_tokens)

    # -- streaming ----------------------------------------------------------------------------------

    async def prefetch(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       on_cancel: Callable[[str], None] | None = None) -> bool:
        """Send the request `stream(…, messages, tools=tools)` would send, ahead of its turn (agent/prefetch.py)."""
        return await self.client.prefetch(model=self.model, messages=messages, tools=tools,
                                          sampling=self.sampling.as_request(), on_cancel=on_cancel)

    async def stream(self, stats: CallStats, messages: list[dict[str, Any]], record: ReplyRecord, *, turn_id: str,
                     allow_events: bool, tools: list[dict[str, Any]] | None = None,
                     tool_choice: Any = None) -> AsyncIterator[Segment | Detected]:
        """Stream one reply: yield Segments as text arrives and Detected requests as soon as each completes.

        With allow_events False (a follow-up round), event blocks are still hidden and tool calls still parsed,
        but nothing is dispatched: search results must never trigger actions. Ignored names are audited.
        """
        guard = SpeakableGuard(self.speakable_rules, first_clause_min_chars=self.first_clause_min_chars)
        stripped: Counter[str] = Counter()  # formatting removed from speech, audited once per reply
        parser = TextEventParser() if self.mode == "dual_agent" else None
        assembler = ToolCallAssembler()
        # the catalog's examples carry event blocks: a block right after an example's label is that example read
        # back, never the child's request
        since_block: list[str] = []

        def requests_from_names(names: tuple[str, ...]) -> list[Detected]:
            out = []
            echo = reads_back_an_example("".join(since_block))
            since_block.clear()
            for name in names:
                if not allow_events or echo:
                    why = "follow-up round" if not allow_events else "an example of the prompt read back"
                    record.ignored_events.append(name)
                    self.audit.record(AuditKind.EVENT_IGNORED, turn_id=turn_id, name=name, reason=why)
                    continue
                out.append(Detected(EventRequest(name=name, turn_id=turn_id, source=SourceProtocol.TEXT_EVENTS)))
            return out

        def requests_from_calls(calls: list[AssembledCall]) -> list[Detected]:
            out = []
            for call in calls:
                record.tool_calls.append(call)
                if not allow_events:
                    record.ignored_events.append(call.name)
                    self.audit.record(AuditKind.EVENT_IGNORED, turn_id=turn_id, name=call.name, reason="follow-up round")
                    continue
                request = EventRequest(name=call.name, turn_id=turn_id, source=SourceProtocol.TOOL_CALLS,
                                       arguments=call.arguments, arguments_error=call.arguments_error)
                record.event_ids[call.call_id] = request.event_id
                out.append(Detected(request))
            return out

        def guarded(items: list[str | Hidden]) -> list[Segment | Detected]:
            out: list[Segment | Detected] = []
            for item in items:
                if isinstance(item, str):
                    record.visible.append(item)
                    out.append(Segment(item))
                else:
                    out.extend(hidden(item))
            return out

        def hidden(item: Hidden) -> list[Detected]:
            calls = calls_from_text(item.values, first_index=len(record.tool_calls))
            if calls:
                names = [call.name for call in calls]
                if self.mode == "chat_agent_tools":
                    self.audit.record(AuditKind.CHAT_TEXT_TOOL_CALL_RECOVERED, turn_id=turn_id, names=names,
                                      raw=_short(item.raw), unclosed=item.unclosed)
                    return requests_from_calls(calls)
                self.audit.record(AuditKind.CHAT_TEXT_TOOL_CALL_HIDDEN, turn_id=turn_id, names=names, raw=_short(item.raw),
                                  reason="tool calls written as text are not run in dual_agent")
                record.unrun_events.extend(names or ("",))
            elif item.kind in _FORMATTING:
                stripped[item.kind] += 1
            elif item.kind == "partial_sentence":
                self.audit.record(AuditKind.CHAT_PARTIAL_SENTENCE_DROPPED, turn_id=turn_id, text=_short(item.raw),
                                  reason=reason(item.kind))
            else:
                self.audit.record(AuditKind.CHAT_TEXT_HIDDEN, turn_id=turn_id, hidden=item.kind, reason=reason(item.kind),
                                  raw=_short(item.raw), unclosed=item.unclosed)
            return []

        try:
            async for item in self.client.stream(stats, model=self.model, messages=messages,
                                                 tools=tools, tool_choice=tool_choice,
                                                 sampling=self.sampling.as_request()):
                if isinstance(item, ContentDelta):
                    if parser is None:
                        for out in guarded(guard.feed(item.text)):
                            yield out
                        continue
                    for parsed in parser.feed(item.text):
                        if isinstance(parsed, Visible):
                            since_block.append(parsed.text)
                            for out in guarded(guard.feed(parsed.text)):
                                yield out
                        elif isinstance(parsed, EventBlock):
                            self.audit.record(AuditKind.CHAT_EVENT_BLOCK, turn_id=turn_id, raw=parsed.raw)
                            for detected in requests_from_names(parsed.names):
                                yield detected
                elif isinstance(item, ToolCallDeltas):
                    for detected in requests_from_calls(assembler.feed(item.deltas)):
                        yield detected
        except BaseException:
            # a fault or cancellation: what was complete was already yielded; nothing partial is spoken or run
            if parser is not None and parser.in_block:
                self.audit.record(AuditKind.CHAT_UNCLOSED_EVENT_BLOCK, turn_id=turn_id, reason="stream aborted")
            if assembler.in_progress:
                self.audit.record(AuditKind.CHAT_INCOMPLETE_TOOL_CALL, turn_id=turn_id, fault=stats.fault)
            raise
        if parser is not None:
            for parsed in parser.close():
                if isinstance(parsed, Visible):
                    for out in guarded(guard.feed(parsed.text)):
                        yield out
                elif isinstance(parsed, UnclosedBlock):
                    self.audit.record(AuditKind.CHAT_UNCLOSED_EVENT_BLOCK, turn_id=turn_id, raw=parsed.raw,
                                      names=list(parsed.names))
                    record.unrun_events.extend(parsed.names or ("",))  # "" = a block with no readable name
        # a reply cut by the token limit ends at its last whole sentence
        for out in guarded(guard.finish(cut_by_length=stats.finish_reason == "length")):
            yield out
        if stripped:
            self.audit.record(AuditKind.CHAT_MARKUP_STRIPPED, turn_id=turn_id, counts=dict(stripped))
        for detected in requests_from_calls(assembler.finish()):
            yield detected


# counted, not recorded one by one (a reply of many `<script>` elements is one audit record, not hundreds)
_FORMATTING = frozenset({"markdown", "emoji", "tag", "script", "markup", "entity", "link_url"})


def speakable_rules(registry: EventRegistry, persona: str = "") -> SpeakableRules:
    """The guard's rules for this registry: every event and tool name, and every prompt text a model might echo."""
    names = [d.name for d in registry] + [d.tool_name for d in registry]
    # the catalog without its examples: an example's reply is natural speech a model may rightly say; the examples
    # are recognised only in their labelled form
    instructions = [catalog_instruction(registry, examples=False), EXAMPLES_HEADER, tools_instruction(),
                    tools_instruction(reply_first=True),
                    FOLLOW_UP_TOOL_NOTE, results_message([]), *LANGUAGE_NOTES.values()]
    examples = [(child, reply) for child, reply, _ in example_lines(registry)]
    properties = [prop for d in registry for prop in (d.schema.get("properties") or {}).items()]
    return SpeakableRules(names, [persona, *instructions] if persona else instructions, examples,
                          parameters=[name for name, _ in properties],
                          values=[str(v) for _, spec in properties for v in (spec.get("enum") or ())])


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
