"""EventAgent: the LLM fallback for arguments the deterministic resolvers could not settle.

It sees only the selected event's schema and a minimal history slice, and answers through a forced named tool call
(widely supported) on its own, cheaper model with a small token limit.

Local servers do not all honour that: llama.cpp's llama-server takes `tool_choice` only as a string (an object is
logged as "must be string" and replaced by "auto", so a small model answers in prose), and others answer HTTP 400.
So the answer form steps down, once per process, the first time a form is refused (an HTTP error naming
`tool_choice` or `response_format`) or ignored (an answer with no tool call): the named object → `"required"` with the one tool →
a JSON-schema-constrained `response_format` (llama.cpp turns it into a grammar) → `json_object` with the schema.
Every later call starts at the form that worked.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict, deque
from typing import Any, Literal, Mapping

from ..events import EventDefinition, FallbackAnswer, ResolveContext
from ..ports.llm import CallStats, ChatStream, Collected, LLMFault
from .tool_calls import parse_arguments

HISTORY_SLICE = 2  # the last user/assistant messages before the current utterance
MAX_TURNS_KEPT = 256

AnswerForm = Literal["named", "required", "json_schema", "json_object"]
ANSWER_FORMS: tuple[AnswerForm, ...] = ("named", "required", "json_schema", "json_object")  # the order tried
_JSON_FORMS = ("json_schema", "json_object")
_FORM_FIELDS = {"named": "tool_choice", "required": "tool_choice", "json_schema": "response_format",
                "json_object": "response_format"}

log = logging.getLogger(__name__)


class EventAgent:
    """Implements the kernel's ArgumentFallback port over an OpenAI-compatible endpoint."""

    def __init__(self, client: ChatStream, *, model: str, max_tokens: int) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.calls: deque[CallStats] = deque(maxlen=256)  # the latest calls; `total` counts them all
        self.total = 0
        # calls per turn id: one EventAgent serves every conversation at once (a remote command and a voice turn),
        # so a turn's cost is looked up by its id, never by counting calls that happened meanwhile
        self._by_turn: OrderedDict[str, list[CallStats]] = OrderedDict()
        self.form: AnswerForm = "named"  # the answer form this server honours (see the module doc); only steps down

    def calls_since(self, total_before: int) -> list[CallStats]:
        """The calls made after `total` was `total_before` (only right when nothing else ran meanwhile)."""
        count = min(self.total - total_before, len(self.calls))
        return list(self.calls)[-count:] if count > 0 else []

    def take_calls(self, turn_id: str) -> list[CallStats]:
        """The calls made for `turn_id` (and forget them: a turn reads its cost once, when it ends)."""
        return self._by_turn.pop(turn_id, [])

    def _record(self, stats: CallStats, turn_id: str | None) -> None:
        self.calls.append(stats)
        self.total += 1
        if turn_id is not None:
            self._by_turn.setdefault(turn_id, []).append(stats)
            self._by_turn.move_to_end(turn_id)
            while len(self._by_turn) > MAX_TURNS_KEPT:  # turns that never collected theirs (bench, a crash)
                self._by_turn.popitem(last=False)

    def build_request(self, definition: EventDefinition, proposed: Mapping[str, Any] | None,
                      missing: tuple[str, ...], context: ResolveContext, *,
                      form: AnswerForm | None = None) -> dict[str, Any]:
        """The whole request in `form` (default: the one this server honours), so tests and the bench can see
        exactly what EventAgent is given."""
        form = form or self.form
        local_time = context.request_time.isoformat()
        system = (
            f"You fill in arguments for the device event '{definition.name}': {definition.description} "
            f"Current local time: {local_time} ({context.timezone}). Use only what the user said. If a required "
            "value is not stated clearly, leave it out instead of guessing."
        )
        if form in _JSON_FORMS:  # no tools: the schema is in the prompt and constrains the answer
            system += (" Answer with only a JSON object of the arguments, following this JSON schema: "
                       + json.dumps(dict(definition.schema), ensure_ascii=False))
        history = [dict(m) for m in list(context.history)[-HISTORY_SLICE:]]
        user = f"User request: {context.utterance}\nStill needed: {', '.join(missing) or 'none'}"
        if proposed:
            user += f"\nAlready known: {json.dumps(dict(proposed), ensure_ascii=False)}"
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *history, {"role": "user", "content": user}],
            "max_tokens": self.max_tokens,
            "temperature": 0,
        }
        if form == "named":
            request["tools"] = [definition.provider_tool()]
            request["tool_choice"] = {"type": "function", "function": {"name": definition.tool_name}}
        elif form == "required":
            request["tools"] = [definition.provider_tool()]
            request["tool_choice"] = "required"
        elif form == "json_schema":
            request["response_format"] = {"type": "json_schema", "json_schema": {
                "name": definition.tool_name, "schema": dict(definition.schema)}}
        else:  # json_object with the schema: llama-cpp-python's and llama-server's own form
            request["response_format"] = {"type": "json_object", "schema": dict(definition.schema)}
        return request

    def _step_down(self, form: AnswerForm, why: str) -> AnswerForm | None:
        """Remember that `form` does not work on this server; the next form to try, or None when none is left."""
        index = ANSWER_FORMS.index(form)
        if index + 1 >= len(ANSWER_FORMS):
            return None
        following = ANSWER_FORMS[index + 1]
        if ANSWER_FORMS.index(self.form) < index + 1:  # concurrent calls may have stepped down already
            self.form = following
            log.warning("EventAgent: %s %s; asking in the %r form from now on", self.client.base_url, why, following)
        return following

    async def propose(self, definition: EventDefinition, proposed: Mapping[str, Any] | None,
                      missing: tuple[str, ...], context: ResolveContext, *,
                      turn_id: str | None = None) -> FallbackAnswer:
        form: AnswerForm | None = self.form
        while form is not None:
            stats = CallStats(purpose="event_agent")
            self._record(stats, turn_id)
            request = self.build_request(definition, proposed, missing, context, form=form)
            try:
                response = await self.client.collect(stats, **request)
            except LLMFault as fault:
                # any HTTP error that names the field: 400, a FastAPI 422, or llama-cpp-python's 500 for a
                # response_format type its request model lacks
                if fault.code.startswith("http_") and _FORM_FIELDS[form] in fault.message.lower():
                    form = self._step_down(form, f"rejected `{_FORM_FIELDS[form]}` ({fault.message[:120]})")
                    continue
                return FallbackAnswer(arguments=None, error=str(fault))
            answer = self._answer(definition, form, response, stats)
            if answer is not None:
                return answer
            # the answer is not in the form asked for: the server ignored it (llama-server: tool_choice → "auto")
            form = self._step_down(form, f"ignored the {form!r} answer form")
        return FallbackAnswer(arguments=None, error="no tool call in the EventAgent answer",
                              prompt_tokens=stats.prompt_tokens, completion_tokens=stats.completion_tokens)

    @staticmethod
    def _answer(definition: EventDefinition, form: AnswerForm, response: Collected,
                stats: CallStats) -> FallbackAnswer | None:
        """The arguments in `response` (a tool call, or the JSON content in the JSON forms); None if there are
        none, which means the server did not honour `form`."""
        tokens = dict(prompt_tokens=stats.prompt_tokens, completion_tokens=stats.completion_tokens)
        if form in _JSON_FORMS:
            content = response.content.strip()
            if not content.startswith("{"):
                return None
            arguments, error = parse_arguments(content)
            return FallbackAnswer(arguments=arguments, error=error, **tokens)
        for name, text in response.tool_calls:
            if name in (definition.tool_name, definition.name):
                arguments, error = parse_arguments(text)
                return FallbackAnswer(arguments=arguments, error=error, **tokens)
        # a server that renders tools but parses no call back (llama-cpp-python on the GGUF's own template) leaves
        # the call as text: {"name": ..., "arguments": {...}}, perhaps in a code fence or <tool_call> tags
        content = response.content
        start, end = content.find("{"), content.rfind("}")
        if start >= 0 and end > start:
            try:
                call = json.loads(content[start:end + 1])
            except ValueError:
                return None
            if (isinstance(call, dict) and call.get("name") in (definition.tool_name, definition.name)
                    and isinstance(call.get("arguments"), dict)):
                return FallbackAnswer(arguments=call["arguments"], error=None, **tokens)
        return None
