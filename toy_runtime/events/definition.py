"""What a plugin declares: the metadata the kernel runs on, instead of branching on names."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ..errors import ToyError
from .model import ResultPolicy, Risk

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


class EventFailure(ToyError):
    """Raised by a handler (or resolver) for a structured, user-explainable failure."""

    code = "event_failed"

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})


@dataclass(frozen=True)
class ResolveContext:
    """What a deterministic resolver may look at: the user's words and a captured clock."""

    utterance: str
    request_time: datetime  # aware datetime captured when the turn started
    timezone: str  # IANA zone of the session
    history: Sequence[Mapping[str, str]] = ()  # recent visible turns: {"role", "content"}
    locale: str = "en"


@dataclass(frozen=True)
class Resolution:
    """A resolver's verdict on the arguments of one request.

    - `error` set → invalid request (out of range, contradictory): a structured failure, never executed.
    - `missing`/`ambiguous` non-empty → incomplete: LLM fallback if allowed, else clarification.
    - otherwise → complete arguments ready for schema validation.
    """

    arguments: Mapping[str, Any]
    missing: tuple[str, ...] = ()
    ambiguous: tuple[str, ...] = ()
    error: str | None = None
    error_code: str | None = None
    question: str | None = None  # the focused clarification question when incomplete
    # only the user can settle what is missing (their words outrank any model's proposal): ask, skip the fallback
    needs_user: bool = False

    @property
    def complete(self) -> bool:
        return self.error is None and not self.missing and not self.ambiguous


@dataclass(frozen=True)
class ExecutionContext:
    """What a handler receives besides its arguments."""

    session_id: str
    turn_id: str
    event_id: str
    idempotency_key: str


Resolver = Callable[[Mapping[str, Any] | None, ResolveContext], Resolution]
Handler = Callable[[Mapping[str, Any], ExecutionContext], Awaitable[Mapping[str, Any]]]
Template = Callable[[Mapping[str, Any], Mapping[str, Any]], str]  # (arguments, result) -> line
# told to the model next to a definition that requires confirmation: its reply comes before the child's yes, so it
# must not announce the action as done or under way
CONFIRMATION_NOTE = "It runs only after the child says yes to a question: never say it is done."
Supports = Callable[[Mapping[str, Any], ResolveContext], bool]  # (resolved arguments, the child's words) -> asked?
Claims = Callable[[str], bool]  # one sentence the toy speaks -> does it claim this action?

# error_code of a model's request the child's words do not support (`EventDefinition.supports` said no)
NOT_ASKED = "not_asked"


@dataclass(frozen=True)
class EventDefinition:
    """One flat plugin definition. The kernel reads only these fields."""

    name: str
    version: int
    tool_name: str
    description: str
    schema: Mapping[str, Any]
    resolver: Resolver
    handler: Handler
    result_policy: ResultPolicy
    llm_fallback: bool = True
    risk: Risk = Risk.LOW
    idempotent: bool = True
    read_only: bool = False
    concurrency_class: str | None = None  # events sharing a class never overlap and keep input order
    conflicts: frozenset[str] = frozenset()  # other classes this event must not overlap with
    timeout_s: float = 5.0
    retries: int = 0  # only honoured for read_only events
    terminal: bool = False
    requires_confirmation: bool = False
    confirmation_question: Template | None = None
    success_template: Template | None = None  # spoken for template_follow_up
    failure_template: Template | None = None  # corrective line when execution fails
    # Design 000 §4, whether a failure is safe to expose to ChatAgent: error code → a fixed phrase the follow-up
    # prompt may show. Raw error strings (exception text, a server's reply) never reach a prompt; a code not
    # listed here shows as its status word only ("failed", "timed_out").
    failure_visible: Mapping[str, str] = field(default_factory=dict)
    summarize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None  # compact result for follow-up
    # Offline gate: `gate_match` says an utterance is a clear, high-confidence request for this event (no LLM
    # needed); `gate_reply` is the templated answer spoken before it runs.
    gate_match: Callable[[ResolveContext], bool] | None = None
    gate_reply: Template | None = None
    tags: frozenset[str] = field(default_factory=frozenset)
    # False: registered (requests for it are still resolved and answered) but left out of the catalog and tools
    # the ChatAgent is shown, so the model is never told it can do this (e.g. web search when none is set up).
    advertised: bool = True
    # Truthfulness (issue 27): `supports` says whether the child's words ask for this action with these arguments;
    # a request the MODEL proposed that is not supported is refused (never run, audited). The kernel asks it first
    # with no arguments (do the words ask for this kind of action at all? if not, no fallback call, no question)
    # and again with the resolved ones. For actions the child would notice (ending the session, the toy's sound):
    # a model must not do them on its own. `claims` says whether one sentence
    # the toy speaks claims this action ("I've done it", "see you!"), so a promise without its action is found.
    supports: Supports | None = None
    claims: Claims | None = None

    def __post_init__(self) -> None:
        if not _EVENT_NAME.match(self.name):
            raise ValueError(f"event name {self.name!r} must be namespaced like 'area.thing.verb'")
        if not _TOOL_NAME.match(self.tool_name):
            raise ValueError(f"tool name {self.tool_name!r} must match [a-zA-Z0-9_-]{{1,64}}")
        if self.retries and not self.read_only:
            raise ValueError(f"{self.name}: retries are allowed only for read-only events")
        if self.timeout_s <= 0:
            raise ValueError(f"{self.name}: timeout_s must be positive")

    @property
    def lock_keys(self) -> frozenset[str]:
        """Classes this event holds while running; two events conflict when these intersect."""
        keys = set(self.conflicts)
        if self.concurrency_class:
            keys.add(self.concurrency_class)
        return frozenset(keys)

    @property
    def model_description(self) -> str:
        """The description the model is shown (catalog line, tool): with the confirmation note when one is needed."""
        return f"{self.description} {CONFIRMATION_NOTE}" if self.requires_confirmation else self.description

    def provider_tool(self) -> dict[str, Any]:
        """The OpenAI `tools` entry for this definition."""
        return {
            "type": "function",
            "function": {
                "name": self.tool_name,
                "description": self.model_description,
                "parameters": dict(self.schema),
            },
        }
