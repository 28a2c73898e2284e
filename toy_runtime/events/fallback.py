"""The port through which the kernel asks an LLM (EventAgent) for missing or ambiguous arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from .definition import EventDefinition, ResolveContext


@dataclass(frozen=True)
class FallbackAnswer:
    """Arguments proposed by the fallback model, and what the call cost."""

    arguments: Mapping[str, Any] | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ArgumentFallback(Protocol):
    """EventAgent: proposes arguments for one event from its schema and a minimal history slice."""

    async def propose(
        self,
        definition: EventDefinition,
        proposed: Mapping[str, Any] | None,
        missing: tuple[str, ...],
        context: ResolveContext,
        *,
        turn_id: str | None = None,
    ) -> FallbackAnswer:
        """Arguments for `missing`; `turn_id` says which turn the call (and its tokens) belongs to."""
        ...


class ScriptedFallback:
    """An in-memory fallback that answers from a dict keyed by event name (for tests and demos)."""

    def __init__(self, answers: Mapping[str, Mapping[str, Any] | None] | None = None, tokens: int = 0) -> None:
        self.answers = dict(answers or {})
        self.tokens = tokens
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.turn_ids: list[str | None] = []  # the turn each call was made for

    async def propose(self, definition, proposed, missing, context, *, turn_id=None) -> FallbackAnswer:
        self.calls.append((definition.name, missing))
        self.turn_ids.append(turn_id)
        args = self.answers.get(definition.name)
        return FallbackAnswer(arguments=args, prompt_tokens=self.tokens, completion_tokens=0)
