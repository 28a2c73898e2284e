"""Host event envelopes and the router that binds them to runners (design: host-event-envelope-design.zh.md).

Everything that enters the runtime — a user utterance, a button, a reminder, a remote command — is an envelope.
Non-message events are never disguised as user text: each has its own type and input payload.
"""

from __future__ import annotations

import enum
import time
import uuid
from typing import Any, Awaitable, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ToyError


class EventType(enum.StrEnum):
    """Stable host event types."""

    MESSAGE_RECEIVED = "message.received"
    BUTTON_PRESSED = "button.pressed"
    SCHEDULE_TRIGGERED = "schedule.triggered"
    API_INVOKED = "api.invoked"
    SESSION_REQUESTED = "session.requested"


class EventSource(BaseModel):
    """Where the envelope came from."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["microphone", "console", "firmware", "scheduler", "remote_api", "system", "bench"]
    name: str = ""


class ActorRef(BaseModel):
    """Who caused the event (the child, the system, a companion app, the owner at the debug console...)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["user", "system", "app", "fleet", "owner"]
    id: str = ""


class SubjectRef(BaseModel):
    """What the event is about (a message, a schedule entry, a remote request...)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    id: str = ""


class AgentInput(BaseModel):
    """The input payload: text for messages, structured data for everything else."""

    model_config = ConfigDict(frozen=True)

    text: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class DeliveryContext(BaseModel):
    """Where a reply is delivered; the runner reads it (a command's result is published on MQTT only for surface
    "mqtt", host/commands.py). The design's `supports_streaming` and `open_audio_session` are left out: nothing read
    them (each command's reminder binding delivers a reminder its own way)."""

    model_config = ConfigDict(frozen=True)

    surface: Literal["speaker", "console", "mqtt", "none"] = "speaker"


def _event_id() -> str:
    return "he_" + uuid.uuid4().hex[:16]


class HostEvent(BaseModel):
    """The envelope of every event entering the runtime."""

    model_config = ConfigDict(frozen=True)

    event_id: str = Field(default_factory=_event_id)
    event_type: str
    event_time: float = Field(default_factory=time.time)
    source: EventSource
    conversation_id: str | None = None
    actor: ActorRef | None = None
    subject: SubjectRef | None = None
    input: AgentInput = Field(default_factory=AgentInput)
    delivery: DeliveryContext = Field(default_factory=DeliveryContext)
    metadata: dict[str, Any] = Field(default_factory=dict)


def message_event(text: str, *, source: str = "console", conversation_id: str | None = None) -> HostEvent:
    """A `message.received` envelope for one user utterance."""
    return HostEvent(
        event_type=EventType.MESSAGE_RECEIVED,
        source=EventSource(kind=source),
        conversation_id=conversation_id,
        actor=ActorRef(kind="user"),
        subject=SubjectRef(kind="message"),
        input=AgentInput(text=text),
    )


class Binding(BaseModel):
    """Routes event types to a runner and says what that runner may do."""

    model_config = ConfigDict(frozen=True)

    binding_id: str
    event_types: tuple[str, ...]
    runner: str
    enabled: bool = True
    capabilities: frozenset[str] = frozenset()  # event names this binding may invoke directly (remote commands)
    source_kinds: tuple[str, ...] = ()  # empty = any source
    actor_kinds: tuple[str, ...] = ()  # empty = any actor; else an envelope without one of these actors is refused
    actor_ids: tuple[str, ...] = ()  # empty = any id of those kinds (e.g. only the console's own owner)

    def accepts_actor(self, actor: ActorRef | None) -> bool:
        """Whether this binding runs envelopes caused by `actor` (no filter: anyone, even no actor)."""
        if not self.actor_kinds and not self.actor_ids:
            return True
        if actor is None:
            return False
        return (not self.actor_kinds or actor.kind in self.actor_kinds) and (
            not self.actor_ids or actor.id in self.actor_ids)


Runner = Callable[[HostEvent, Binding], Awaitable[Any]]


class NoBinding(ToyError, LookupError):
    """No enabled binding accepts this event."""

    code = "no_binding"


class ActorRefused(NoBinding):
    """A binding routes this event type from this source, but not from this actor."""

    code = "actor_refused"


class HostEventRouter:
    """Picks the first enabled binding that matches an event and calls its runner."""

    def __init__(self) -> None:
        self._bindings: list[Binding] = []
        self._runners: dict[str, Runner] = {}

    def add_runner(self, name: str, runner: Runner) -> None:
        self._runners[name] = runner

    def bind(self, binding: Binding) -> None:
        if binding.runner not in self._runners:
            raise ValueError(f"binding {binding.binding_id!r} names unknown runner {binding.runner!r}")
        self._bindings.append(binding)

    def resolve(self, event: HostEvent) -> Binding:
        """The first binding for this type, source and actor; ActorRefused when only the actor did not fit."""
        refused_by: list[str] = []
        for binding in self._bindings:
            if not binding.enabled or event.event_type not in binding.event_types:
                continue
            if binding.source_kinds and event.source.kind not in binding.source_kinds:
                continue
            if not binding.accepts_actor(event.actor):
                refused_by.append(binding.binding_id)
                continue
            return binding
        if refused_by:
            who = f"{event.actor.kind}:{event.actor.id}" if event.actor else "no actor"
            raise ActorRefused(f"binding {', '.join(refused_by)} refuses {event.event_type} from {who}")
        raise NoBinding(f"no binding for {event.event_type} from {event.source.kind}")

    async def dispatch(self, event: HostEvent) -> Any:
        binding = self.resolve(event)
        return await self._runners[binding.runner](event, binding)
