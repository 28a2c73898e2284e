"""Assembles streamed OpenAI tool-call deltas into complete calls (chat_agent_tools mode).

Feed `chunk.choices[0].delta.tool_calls` (openai objects or plain dicts) as it arrives. Deltas are
grouped by `index`:

- `id` is taken from the first delta that has one; a later delta at the same index with a
  *different* id starts a new call (some servers put every call at index 0);
- `function.name` is never concatenated: some servers repeat the full name in every delta, so a
  non-empty name replaces the stored one;
- `function.arguments` fragments are concatenated.

Completion rule, kept deliberately simple: a call is complete when a delta for a higher index (or a
new id) arrives, or when `finish()` is called at the end of the stream. A call whose arguments
already parse as JSON is *not* completed early, because a later fragment could still belong to it.
`feed()` returns the calls its delta completed, so the caller can dispatch them at once.

Arguments never raise: empty → `{}`, JSON `null` → `{}`, malformed or non-object → `arguments=None`
with `arguments_error` set (the pipeline then treats them as missing).

Small local models (Qwen2.5 on llama.cpp, some Ollama models) often write the call into the content instead:
`calls_from_text()` turns the JSON values the speakable guard found there (`{"name": …, "arguments": …}`, a list of
them, `{"function": {…}}`, `{"tool_calls": […]}`) into the same `AssembledCall`s, through the same argument rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True, slots=True)
class AssembledCall:
    """One complete provider tool call.

    `call_id` is the provider's id, or `call_<index>` when the server never sent one (it is needed
    to answer the call in provider history).
    """

    index: int
    call_id: str
    name: str
    arguments: dict[str, Any] | None
    arguments_error: str | None
    raw_arguments: str


@dataclass(frozen=True, slots=True)
class HistoryCall:
    """A call kept in ChatAgent's own history (chat_agent_tools): the event that ran, in the provider's form, and
    its status only, never its result."""

    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    status: str

    def provider_call(self) -> dict[str, Any]:
        """The entry for the assistant message's `tool_calls`."""
        return {"id": self.call_id, "type": "function",
                "function": {"name": self.tool_name,
                             "arguments": json.dumps(self.arguments, ensure_ascii=False, default=str)}}

    def tool_message(self) -> dict[str, Any]:
        """The tool message that answers the call (the provider requires one per call)."""
        return {"role": "tool", "tool_call_id": self.call_id, "content": json.dumps({"status": self.status})}


def parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Decode a tool call's argument string into (arguments, error); never raises."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"malformed JSON arguments: {exc}"
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return None, f"arguments are a JSON {type(value).__name__}, not an object"
    return value, None


@dataclass(slots=True)
class _Partial:
    index: int
    call_id: str | None = None
    name: str = ""
    fragments: list[str] = field(default_factory=list)

    def complete(self) -> AssembledCall:
        raw = "".join(self.fragments)
        arguments, error = parse_arguments(raw)
        return AssembledCall(
            index=self.index,
            call_id=self.call_id or f"call_{self.index}",
            name=self.name,
            arguments=arguments,
            arguments_error=error,
            raw_arguments=raw,
        )


def _get(obj: Any, key: str) -> Any:
    """Read a field from an openai delta object or a plain dict."""
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


class ToolCallAssembler:
    """Turns streamed tool-call deltas into `AssembledCall`s. One assembler per model response."""

    def __init__(self) -> None:
        self._open: _Partial | None = None  # deltas for lower indexes never come back once a higher one starts
        self._completed = 0
        self._dropped = 0

    @property
    def completed_count(self) -> int:
        """How many calls have been returned so far."""
        return self._completed

    @property
    def dropped_deltas(self) -> int:
        """Deltas that arrived for an index already completed (interleaving servers); worth auditing."""
        return self._dropped

    @property
    def in_progress(self) -> bool:
        """True while a call has started but is not complete yet."""
        return self._open is not None

    def feed(self, deltas: Iterable[Any] | None) -> list[AssembledCall]:
        """Consume one chunk's `delta.tool_calls` (None is fine); return the calls it completed."""
        done: list[AssembledCall] = []
        for delta in deltas or ():
            self._feed_one(delta, done)
        return done

    def finish(self) -> list[AssembledCall]:
        """End of stream: complete whatever is still open."""
        done: list[AssembledCall] = []
        self._close_open(done)
        return done

    def _feed_one(self, delta: Any, done: list[AssembledCall]) -> None:
        index = _get(delta, "index")
        call_id = _get(delta, "id") or None
        current = self._open
        if index is None:  # tolerated: servers that omit the index continue the current call
            index = current.index if current is not None else 0
        if current is not None:
            new_index = index > current.index
            new_id = call_id is not None and current.call_id is not None and call_id != current.call_id
            if new_index or new_id:
                self._close_open(done)
                current = None
            elif index < current.index:
                self._dropped += 1  # that call was already dispatched; a late fragment cannot be honoured
                return
        if current is None:
            current = self._open = _Partial(index=index)
        if call_id is not None and current.call_id is None:
            current.call_id = call_id
        function = _get(delta, "function")
        if function is None:
            return
        name = _get(function, "name")
        if name:
            current.name = name  # repeated full names replace, never concatenate
        arguments = _get(function, "arguments")
        if arguments:
            current.fragments.append(arguments)

    def _close_open(self, done: list[AssembledCall]) -> None:
        if self._open is not None:
            done.append(self._open.complete())
            self._open = None
            self._completed += 1


TEXT_CALL_PREFIX = "text_call_"


def _call_shape(value: Any) -> tuple[str, Any] | None:
    """(name, raw arguments) when `value` has the shape of one tool call, else None."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):  # {"type": "function", "function": {"name": …, "arguments": …}}
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    if "arguments" in value:
        return name.strip(), value["arguments"]
    if "parameters" in value:  # the Llama 3 spelling
        return name.strip(), value["parameters"]
    if set(value) <= {"name", "type", "id"}:
        return name.strip(), None  # a call without arguments
    return None


def calls_from_text(values: Iterable[Any], *, first_index: int = 0) -> list[AssembledCall]:
    """Tool calls written as text: each JSON value found in the content that has a call's shape, in order.

    Names are not checked here (unknown ones are rejected later, exactly like native calls); arguments go through
    `parse_arguments` when they are a string, and the same empty/null/non-object rules when they are a value.
    """
    shapes: list[tuple[str, Any]] = []
    for value in values:
        if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
            value = value["tool_calls"]
        for item in value if isinstance(value, list) else (value,):
            shape = _call_shape(item)
            if shape is not None:
                shapes.append(shape)
    calls = []
    for offset, (name, raw) in enumerate(shapes):
        raw_text = raw if isinstance(raw, str) else ("" if raw is None else json.dumps(raw, ensure_ascii=False))
        arguments, error = parse_arguments(raw_text)
        index = first_index + offset
        calls.append(AssembledCall(index=index, call_id=f"{TEXT_CALL_PREFIX}{index}", name=name,
                                   arguments=arguments, arguments_error=error, raw_arguments=raw_text))
    return calls
