"""What the firmware sends, as host events: the talk button and remote commands (`api.invoked`).

- `button.pressed` goes to the command's button handler (the voice loop: open a session / push-to-talk).
- `api.invoked` commands (companion app, fleet) run through the same kernel, but only for event names the remote
  binding grants (`[mqtt] remote_capabilities`); anything else is refused and audited.

Starting the MQTT link itself imports an adapter, so it belongs to the composition root (`app/firmware_link.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from ..audit import AuditKind, AuditSink
from ..events import EventKernel
from ..ports.clock import Clock
from .commands import CommandRunner
from .envelope import ActorRefused, Binding, EventType, HostEvent, HostEventRouter

if TYPE_CHECKING:
    from ..config import Settings

ButtonHandler = Callable[[HostEvent], Awaitable[None]]
REMOTE_ACTORS = ("app", "fleet")  # who may send a remote command; the remote binding refuses anyone else

class RemoteCommandRunner(CommandRunner):
    """Runs `api.invoked` commands through the kernel when the binding grants the capability and the arguments
    satisfy the event's JSON schema (else `refused` / `invalid`, audited, nothing runs); the result is published on
    MQTT for envelopes whose delivery surface is "mqtt" (host/commands.py)."""

    def __init__(self, kernel: EventKernel, audit, clock, timezone_name: str,
                 publish_result: Callable[..., Awaitable[None]]) -> None:
        super().__init__(kernel, audit, clock, timezone_name, replies={"mqtt": publish_result})
        self.publish_result = publish_result


def bind_firmware(router: HostEventRouter, kernel: EventKernel, audit: AuditSink, clock: Clock, settings: Settings,
                  publish_result: Callable[..., Awaitable[None]], *, on_button: ButtonHandler | None = None) -> None:
    """Register the firmware's runners and bindings on the runtime's router: remote commands (granted names only,
    `[mqtt] remote_capabilities`) and the firmware's buttons."""

    async def buttons(event: HostEvent, binding: Binding) -> None:
        audit.record(AuditKind.HOST_BUTTON, host_event_id=event.event_id, data=event.input.data)
        if on_button is not None:
            await on_button(event)

    router.add_runner("remote_commands", RemoteCommandRunner(kernel, audit, clock, settings.session.timezone,
                                                             publish_result))
    router.add_runner("buttons", buttons)
    router.bind(Binding(binding_id="remote", event_types=(EventType.API_INVOKED,), runner="remote_commands",
                        capabilities=frozenset(settings.mqtt.remote_capabilities),
                        # only the firmware link's commands, and only from the companion app or the fleet
                        source_kinds=("remote_api",), actor_kinds=REMOTE_ACTORS))
    router.bind(Binding(binding_id="firmware-buttons", event_types=(EventType.BUTTON_PRESSED,), runner="buttons",
                        source_kinds=("firmware",)))


async def dispatch_audited(router: HostEventRouter, event: HostEvent, audit,
                           publish_result: Callable[..., Awaitable[None]] | None = None) -> None:
    """Dispatch an event that arrived on its own (nobody awaits the answer): no binding or a failing runner is
    audited, never raised. A remote command the router would not run is still answered (`publish_result`): the
    sender's app waits for a result, and a refused actor must hear "refused", not silence."""
    command_id = str(event.input.data.get("command_id", event.event_id))
    answer = publish_result if event.event_type == EventType.API_INVOKED and event.delivery.surface == "mqtt" else None
    try:
        await router.dispatch(event)
    except LookupError as exc:
        audit.record(AuditKind.HOST_UNROUTED, host_event_id=event.event_id, event_type=event.event_type, reason=str(exc))
        if answer is not None:
            code = "actor_not_allowed" if isinstance(exc, ActorRefused) else "not_routed"
            await answer(command_id, status="refused", error_code=code, error_message=str(exc))
    except Exception as exc:  # a runner bug must not kill the bridge
        audit.record(AuditKind.HOST_RUNNER_FAILED, host_event_id=event.event_id, event_type=event.event_type, error=str(exc))
        if answer is not None:
            await answer(command_id, status="failed", error_code="internal_error", error_message=type(exc).__name__)
