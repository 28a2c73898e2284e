"""What the firmware sends, as host events: the talk button and remote commands (`api.invoked`).

- `button.pressed` goes to the command's button handler (the voice loop: open a session / push-to-talk).
- `api.invoked` commands (companion app, fleet) run through the same kernel, but only for event names the remote
  binding grants (`[mqtt] remote_capabilities`); anything else is refused and audited.

Starting the MQTT link itself imports an adapter, so it belongs to the composition root (`app/firmware.py`).
"""

from __future__ import annotations

from typing import Awaitable, Callable

from ..events import AuditKind, EventKernel, EventRequest, ResolveContext, SourceProtocol
from .envelope import Binding, EventType, HostEvent, HostEventRouter

ButtonHandler = Callable[[HostEvent], Awaitable[None]]

MAX_ERROR_CHARS = 300  # schema messages quote the offending value, which a stranger chose


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RemoteCommandRunner:
    """Runs `api.invoked` commands through the kernel when the binding grants the capability and the arguments
    satisfy the event's JSON schema (else `refused` / `invalid`, audited, nothing runs)."""

    def __init__(self, kernel: EventKernel, audit, clock, timezone_name: str,
                 publish_result: Callable[..., Awaitable[None]]) -> None:
        self.kernel = kernel
        self.audit = audit
        self.clock = clock
        self.timezone_name = timezone_name
        self.publish_result = publish_result

    async def __call__(self, event: HostEvent, binding: Binding) -> None:
        data = event.input.data
        name = str(data.get("name", ""))
        command_id = str(data.get("command_id", event.event_id))
        definition = self.kernel.registry.lookup(name)
        if definition is None or definition.name not in binding.capabilities:
            self.audit.record(AuditKind.REMOTE_REFUSED, host_event_id=event.event_id, name=name, command_id=command_id,
                              actor=event.actor.model_dump() if event.actor else None, binding=binding.binding_id)
            await self.publish_result(command_id, status="refused", error_code="capability_not_granted",
                                      error_message=f"{name or 'command'} is not allowed remotely")
            return
        arguments = data.get("arguments") or {}
        problems = (self.kernel.registry.schema_errors(definition.name, arguments) if isinstance(arguments, dict)
                    else ("arguments must be an object",))
        if problems:
            # The schema answers first: bad arguments never reach a resolver's guesses or the EventAgent (a paid
            # model call a stranger on the broker could otherwise trigger at will).
            self.audit.record(AuditKind.REMOTE_REFUSED, host_event_id=event.event_id, name=definition.name,
                              command_id=command_id, actor=event.actor.model_dump() if event.actor else None,
                              binding=binding.binding_id, reason="invalid_arguments",
                              errors=[_clip(problem, 200) for problem in problems[:5]])
            await self.publish_result(command_id, status="invalid", error_code="invalid_arguments",
                                      error_message=_clip("; ".join(problems), MAX_ERROR_CHARS))
            return
        from zoneinfo import ZoneInfo

        context = ResolveContext(utterance="", request_time=self.clock.now().astimezone(ZoneInfo(self.timezone_name)),
                                 timezone=self.timezone_name)
        request = EventRequest(name=definition.name, turn_id=f"remote.{command_id}", source=SourceProtocol.HOST,
                               arguments=dict(arguments), event_id=event.event_id)
        # no words to read and nobody to answer a question: never let the EventAgent guess what a remote sender
        # left out (the schema already refused what it could; this closes the rest)
        run = self.kernel.open_batch("remote", request.turn_id, context, use_fallback=False)
        run.add(request)
        run.close()
        outcome = await run.wait()
        result = outcome.results[0] if outcome.results else None
        self.audit.record(AuditKind.REMOTE_EXECUTED, host_event_id=event.event_id, name=definition.name,
                          command_id=command_id, status=result.status.value if result else "dropped")
        if result is not None and result.ok:
            await self.publish_result(command_id, status="ok", result=dict(result.result))
        else:
            await self.publish_result(command_id, status="failed",
                                      error_code=(result.error_code if result else "dropped") or "failed",
                                      error_message=(result.error if result else "") or "")


def bind_firmware(router: HostEventRouter, runtime, publish_result: Callable[..., Awaitable[None]], *,
                  on_button: ButtonHandler | None = None) -> None:
    """Register the firmware's runners and bindings on the runtime's router: remote commands (granted names only)
    and the firmware's buttons."""

    async def buttons(event: HostEvent, binding: Binding) -> None:
        runtime.audit.record(AuditKind.HOST_BUTTON, host_event_id=event.event_id, data=event.input.data)
        if on_button is not None:
            await on_button(event)

    settings = runtime.settings
    router.add_runner("remote_commands", RemoteCommandRunner(runtime.kernel, runtime.audit, runtime.clock,
                                                             settings.session.timezone, publish_result))
    router.add_runner("buttons", buttons)
    router.bind(Binding(binding_id="remote", event_types=(EventType.API_INVOKED,), runner="remote_commands",
                        capabilities=frozenset(settings.mqtt.remote_capabilities)))
    router.bind(Binding(binding_id="firmware-buttons", event_types=(EventType.BUTTON_PRESSED,), runner="buttons",
                        source_kinds=("firmware",)))


async def dispatch_audited(router: HostEventRouter, event: HostEvent, audit) -> None:
    """Dispatch an event that arrived on its own (nobody awaits the answer): no binding or a failing runner is
    audited, never raised."""
    try:
        await router.dispatch(event)
    except LookupError as exc:
        audit.record(AuditKind.HOST_UNROUTED, host_event_id=event.event_id, event_type=event.event_type, reason=str(exc))
    except Exception as exc:  # a runner bug must not kill the bridge
        audit.record(AuditKind.HOST_RUNNER_FAILED, host_event_id=event.event_id, event_type=event.event_type, error=str(exc))
