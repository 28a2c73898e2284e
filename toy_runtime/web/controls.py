"""What the console may change: the mode and the enabled events from the next turn on, the volume (through the
kernel, exactly like the child's request), the end of the session, and (in `chat`) a typed message.

The volume and the end are commands from outside the child's voice, so they take the one door every such source
takes (like the firmware's remote commands): an `api.invoked` envelope from source "console", caused by the console's
owner, dispatched through the runtime's router; the "console" binding accepts only that owner and grants only
`CONSOLE_CAPABILITIES` (host/commands.py runs it). Every control is audited as `console.control` with who asked and
what came of it; the command itself as `console.command` / `console.command_refused` with its envelope and binding.
"""

from __future__ import annotations

import copy
import itertools
from typing import TYPE_CHECKING, Any, Callable, cast

from ..errors import ToyError
from ..audit import AuditKind
from ..host.commands import CommandReply, CommandRunner, HostAction
from ..host.envelope import (ActorRef, AgentInput, Binding, DeliveryContext, EventSource, EventType, HostEvent,
                             NoBinding, SubjectRef)

if TYPE_CHECKING:
    from ..agent.chat_agent import Mode as AgentMode
    from ..host.envelope import HostEventRouter
    from .parts import ConsoleParts

__all__ = ["ControlError", "Controls", "TurnOverrides", "MODES", "VOLUME_EVENT", "END_SESSION",
           "CONSOLE_CAPABILITIES", "CONSOLE_OWNER", "bind_console"]

MODES = ("dual_agent", "chat_agent_tools")
VOLUME_EVENT = "device.volume.adjust"
END_SESSION = "session.end"  # a host action, not a kernel event: the command's own way to end its session
CONSOLE_CAPABILITIES = frozenset({VOLUME_EVENT, END_SESSION})
# Whoever passed the console's guard (its token, or loopback with Host and Origin checks): the toy's owner.
CONSOLE_OWNER = ActorRef(kind="owner", id="console")


class ControlError(ToyError, ValueError):
    """A control request that cannot be carried out (bad value, unavailable here): answered with 400."""

    code = "bad_control"


class TurnOverrides:
    """The mode and enabled events the console chose; the turn runner reads them as each turn starts.

    A turn already running keeps what it started with. The kernel keeps its shared concurrency limits, locks and
    idempotency store: a restricted view only stops knowing the disabled events (so neither the model nor the
    offline gate can run them). The speakable guard keeps every event name hidden from speech.
    """

    def __init__(self, runtime: ConsoleParts) -> None:
        self.chat = runtime.chat_agent
        self.kernel = runtime.kernel
        self.audit = runtime.audit
        self.available: tuple[str, ...] = tuple(d.name for d in runtime.registry)
        self.default_mode = self.chat.mode if self.chat is not None else None
        self.mode = self.default_mode
        self.enabled: tuple[str, ...] = self.available
        self._variants: dict[tuple, tuple] = {}

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ControlError(f"mode must be one of {', '.join(MODES)}")
        if self.chat is None:
            raise ControlError("offline (no LLM endpoint): the offline gate answers in every mode")
        self.mode = cast("AgentMode", mode)  # one of MODES, checked above

    def set_enabled(self, names) -> None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ControlError("events must be a list of event names")
        unknown = sorted(set(names) - set(self.available))
        if unknown:
            raise ControlError(f"unknown events: {', '.join(unknown)}")
        self.enabled = tuple(n for n in self.available if n in names)

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode or "offline", "events_enabled": list(self.enabled),
                "events_available": list(self.available)}

    def apply(self, runner) -> None:
        """`before_turn`: give the runner the chosen ChatAgent, kernel and gate for the turn it starts now."""
        from ..session.gate import OfflineGate

        key = (self.mode, self.enabled)
        if key == (self.default_mode, self.available):
            chat, kernel = self.chat, self.kernel
        else:
            if key not in self._variants:
                self._variants[key] = self._variant()
            chat, kernel = self._variants[key]
        if runner.kernel is not kernel:
            runner.gate = OfflineGate(kernel.registry, runner.audit)
        runner.chat, runner.kernel = chat, kernel

    def _variant(self) -> tuple:
        registry = self.kernel.registry.subset(self.enabled)
        kernel = copy.copy(self.kernel)  # shares semaphore, locks and idempotency with the real one
        kernel.registry = registry
        kernel.definitions = {d.name: d for d in registry}
        chat = None
        if self.chat is not None:
            chat = copy.copy(self.chat)
            chat.mode, chat.registry = self.mode or chat.mode, registry  # speakable_rules stay those of every event
        return chat, kernel


def bind_console(router: HostEventRouter, runtime: ConsoleParts, *, end_session: HostAction, owner: ActorRef = CONSOLE_OWNER,
                 capabilities: frozenset[str] = CONSOLE_CAPABILITIES) -> Binding:
    """Register the console's command runner and its binding on the runtime's router: `api.invoked` from source
    "console", only from `owner`, granting `capabilities`."""
    runner = CommandRunner(runtime.kernel, runtime.audit, runtime.clock, runtime.settings.session.timezone,
                           host_actions={END_SESSION: end_session}, origin="console")
    router.add_runner("console_commands", runner)
    binding = Binding(binding_id="console", event_types=(EventType.API_INVOKED,), runner="console_commands",
                      capabilities=frozenset(capabilities), source_kinds=("console",),
                      actor_kinds=(owner.kind,), actor_ids=(owner.id,))
    router.bind(binding)
    return binding


class Controls:
    """The console's actions on a running runtime."""

    def __init__(self, runtime: ConsoleParts, overrides: TurnOverrides, *, send_message: Callable[[str], None] | None = None,
                 owner: ActorRef = CONSOLE_OWNER) -> None:
        self.runtime = runtime
        self.overrides = overrides
        self.send_message = send_message
        self.owner = owner
        self._ids = itertools.count(1)

    async def run(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """Carry out one control; returns what the page shows. ControlError for a request that cannot be done."""
        if action == "volume":
            return await self._volume(body.get("level"))
        if action == "mode":
            self.overrides.set_mode(str(body.get("mode")))
            return {"ok": True, **self.overrides.describe()}
        if action == "events":
            self.overrides.set_enabled(body.get("enabled"))
            return {"ok": True, **self.overrides.describe()}
        if action == "end":
            await self.command(END_SESSION)
            return {"ok": True}
        if action == "message":
            text = body.get("text")
            if self.send_message is None:
                raise ControlError("typing a message works in `toy-runtime chat` only")
            if not isinstance(text, str) or not text.strip() or len(text) > 2000:
                raise ControlError("text must be 1-2000 characters")
            self.send_message(text.strip())
            return {"ok": True}
        raise ControlError(f"unknown control {action!r}")

    async def _volume(self, level: Any) -> dict[str, Any]:
        """device.volume.adjust as a console command: through the router, then the kernel (resolved, validated,
        audited, signalled)."""
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 100:
            raise ControlError("level must be an integer 0-100")
        if self.runtime.kernel.registry.lookup(VOLUME_EVENT) is None:
            raise ControlError(f"{VOLUME_EVENT} is not enabled in this runtime")
        reply = await self.command(VOLUME_EVENT, {"mode": "absolute", "value": level})
        if reply.event_status is None:
            return {"ok": False, "status": "dropped"}
        return {"ok": reply.ok, "status": reply.event_status, "event_id": reply.event_id,
                "result": dict(reply.result), "error": reply.error_message or None}

    def envelope(self, name: str, arguments: dict[str, Any] | None = None) -> HostEvent:
        """The `api.invoked` envelope of one console command, caused by the console's owner."""
        command_id = str(next(self._ids))
        return HostEvent(event_type=EventType.API_INVOKED, source=EventSource(kind="console", name="web"),
                         actor=self.owner, subject=SubjectRef(kind="console_control", id=command_id),
                         input=AgentInput(data={"name": name, "arguments": dict(arguments or {}),
                                                "command_id": command_id}),
                         # the reply is this page's HTTP answer: nothing is spoken or published for it
                         delivery=DeliveryContext(surface="console"))

    async def command(self, name: str, arguments: dict[str, Any] | None = None) -> CommandReply:
        """Dispatch one command through the runtime's router; ControlError when it is not routed or not granted."""
        event = self.envelope(name, arguments)
        try:
            reply = await self.runtime.router.dispatch(event)
        except NoBinding as exc:
            self.runtime.audit.record(AuditKind.HOST_UNROUTED, host_event_id=event.event_id,
                                      event_type=event.event_type, reason=str(exc))
            raise ControlError(f"{name} is not routed from the console: {exc}") from None
        if reply.status == "refused":
            raise ControlError(reply.error_message)
        return reply
