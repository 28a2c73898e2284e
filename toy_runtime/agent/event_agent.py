"""EventAgent: the LLM fallback for arguments the deterministic resolvers could not settle.

It sees only the selected event's schema and a minimal history slice, and answers through a forced named tool call
(widely supported) on its own, cheaper model with a small token limit.
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from typing import Any, Mapping

from ..events import EventDefinition, FallbackAnswer, ResolveContext
from .llm import CallStats, ChatClient, LLMFault
from .tool_calls import parse_arguments

HISTORY_SLICE = 2  # the last user/assistant messages before the current utterance
MAX_TURNS_KEPT = 256


class EventAgent:
    """Implements the kernel's ArgumentFallback port over an OpenAI-compatible endpoint."""

    def __init__(self, client: ChatClient, *, model: str, max_tokens: int) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.calls: deque[CallStats] = deque(maxlen=256)  # the latest calls; `total` counts them all
        self.total = 0
        # calls per turn id: one EventAgent serves every conversation at once (a remote command and a voice turn),
        # so a turn's cost is looked up by its id, never by counting calls that happened meanwhile
        self._by_turn: OrderedDict[str, list[CallStats]] = OrderedDict()

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
                      missing: tuple[str, ...], context: ResolveContext) -> dict[str, Any]:
        """The whole request, so tests and the bench can see exactly what EventAgent is given."""
        local_time = context.request_time.isoformat()
        system = (
            f"You fill in arguments for the device event '{definition.name}': {definition.description} "
            f"Current local time: {local_time} ({context.timezone}). Use only what the user said. If a required "
            "value is not stated clearly, leave it out instead of guessing."
        )
        history = [dict(m) for m in list(context.history)[-HISTORY_SLICE:]]
        user = f"User request: {context.utterance}\nStill needed: {', '.join(missing) or 'none'}"
        if proposed:
            user += f"\nAlready known: {json.dumps(dict(proposed), ensure_ascii=False)}"
        return {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *history, {"role": "user", "content": user}],
            "tools": [definition.provider_tool()],
            "tool_choice": {"type": "function", "function": {"name": definition.tool_name}},
            "max_tokens": self.max_tokens,
            "temperature": 0,
        }

    async def propose(self, definition: EventDefinition, proposed: Mapping[str, Any] | None,
                      missing: tuple[str, ...], context: ResolveContext, *,
                      turn_id: str | None = None) -> FallbackAnswer:
        stats = CallStats(purpose="event_agent")
        self._record(stats, turn_id)
        try:
            response = await self.client.complete(stats, **self.build_request(definition, proposed, missing, context))
        except LLMFault as fault:
            return FallbackAnswer(arguments=None, error=str(fault))
        tokens = dict(prompt_tokens=stats.prompt_tokens, completion_tokens=stats.completion_tokens)
        choices = getattr(response, "choices", None) or []
        message = choices[0].message if choices else None
        calls = (message.tool_calls or []) if message is not None else []
        for call in calls:
            if call.function.name in (definition.tool_name, definition.name):
                arguments, error = parse_arguments(call.function.arguments or "")
                return FallbackAnswer(arguments=arguments, error=error, **tokens)
        return FallbackAnswer(arguments=None, error="no tool call in the EventAgent answer", **tokens)
