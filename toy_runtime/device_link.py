"""Connecting the runtime to the toy's firmware over MQTT, and the runners for what the firmware sends.

- Session states and volume signals on the SignalBus are mirrored to MQTT by the bridge adapter.
- `button.pressed` host events go to the voice loop (talk press → open a session / push-to-talk).
- `api.invoked` host events (companion app, fleet) run through the same kernel, but only for event names the
  remote binding grants (`[mqtt] remote_capabilities`); anything else is refused and audited.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from .errors import StartError
from .events import EventKernel, EventRequest, ResolveContext, SourceProtocol
from .hostevents import Binding, EventType, HostEvent, HostEventRouter

ButtonHandler = Callable[[HostEvent], Awaitable[None]]

log = logging.getLogger("toy_runtime.device_link")

# Which setting fixes a permanent bridge failure (firmware_bridge names the cause, not our config keys).
_HINTS = {
    "tls_certificate": "set [mqtt] ca_file to the CA that signed the broker's certificate",
    "tls_config": "check [mqtt] ca_file",
    "tls_handshake": "check [mqtt] url and ca_file",
    "tls_required": "check [mqtt] url",
    "tls_not_spoken": "check [mqtt] url",
}


class BridgeStartError(StartError):
    """The bridge cannot connect and retrying would not help (bad credentials, untrusted certificate, TLS on one end
    only): one line for the user, exit 2."""


class RemoteCommandRunner:
    """Runs `api.invoked` commands through the kernel when the binding grants the capability."""

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
            self.audit.record("remote.refused", host_event_id=event.event_id, name=name, command_id=command_id,
                              actor=event.actor.model_dump() if event.actor else None, binding=binding.binding_id)
            await self.publish_result(command_id, status="refused", error_code="capability_not_granted",
                                      error_message=f"{name or 'command'} is not allowed remotely")
            return
        from zoneinfo import ZoneInfo

        context = ResolveContext(utterance="", request_time=self.clock.now().astimezone(ZoneInfo(self.timezone_name)),
                                 timezone=self.timezone_name)
        request = EventRequest(name=definition.name, turn_id=f"remote.{command_id}", source=SourceProtocol.HOST,
                               arguments=dict(data.get("arguments") or {}), event_id=event.event_id)
        run = self.kernel.open_batch("remote", request.turn_id, context)
        run.add(request)
        run.close()
        outcome = await run.wait()
        result = outcome.results[0] if outcome.results else None
        self.audit.record("remote.executed", host_event_id=event.event_id, name=definition.name,
                          command_id=command_id, status=result.status.value if result else "dropped")
        if result is not None and result.ok:
            await self.publish_result(command_id, status="ok", result=dict(result.result))
        else:
            await self.publish_result(command_id, status="failed",
                                      error_code=(result.error_code if result else "dropped") or "failed",
                                      error_message=(result.error if result else "") or "")


@dataclass
class DeviceLink:
    """A running bridge: the client, the adapter and the router feeding host events to their runners."""

    client: Any
    adapter: Any
    router: HostEventRouter
    tasks: list[asyncio.Task] = field(default_factory=list)

    async def aclose(self) -> None:
        tasks, self.tasks = list(self.tasks), []
        for task in tasks:  # in-flight remote commands end before the runtime under them closes
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await self.adapter.stop()
        finally:
            stop = getattr(self.client, "stop", None)
            if stop is not None:
                await stop()


def bridge_config(settings):
    """The firmware_bridge config from `[mqtt]` (the password comes from the environment only)."""
    from firmware_bridge.config import BridgeConfig

    m = settings.mqtt
    return BridgeConfig(url=m.url, device_id=m.device_id, username=m.username, password=m.password,
                        ca_file=str(m.ca_file) if m.ca_file else None, protocol=m.protocol,
                        keepalive_s=m.keepalive_s)


async def start_device_link(runtime, *, on_button: ButtonHandler | None = None,
                            connect_timeout_s: float = 5.0) -> DeviceLink:
    """Connect the bridge, wire the router, and wait until connected or the first failed attempt.

    BridgeStartError for what retrying cannot fix (credentials, certificate, TLS/plain mismatch). A broker that is
    not there yet (refused, timed out) is one warning; the bridge keeps retrying in the background."""
    from firmware_bridge.client import BridgeAuthError, BridgeClient, BridgeError
    from firmware_bridge.endpoint import BridgeUnreachable

    from .adapters.mqtt_bridge import MqttBridgeAdapter

    settings = runtime.settings
    client = BridgeClient(bridge_config(settings))
    router = HostEventRouter()

    async def publish_result(command_id, **kw):
        await adapter.publish_command_result(command_id, **kw)

    async def buttons(event: HostEvent, binding: Binding) -> None:
        runtime.audit.record("host.button", host_event_id=event.event_id, data=event.input.data)
        if on_button is not None:
            await on_button(event)

    router.add_runner("remote_commands", RemoteCommandRunner(runtime.kernel, runtime.audit, runtime.clock,
                                                             settings.session.timezone, publish_result))
    router.add_runner("buttons", buttons)
    router.bind(Binding(binding_id="remote", event_types=(EventType.API_INVOKED,), runner="remote_commands",
                        capabilities=frozenset(settings.mqtt.remote_capabilities)))
    router.bind(Binding(binding_id="firmware-buttons", event_types=(EventType.BUTTON_PRESSED,), runner="buttons",
                        source_kinds=("firmware",)))

    async def on_host_event(event: HostEvent) -> None:
        # hand off at once: the adapter delivers events in order and must not wait for a kernel batch
        task = asyncio.create_task(_dispatch(router, event, runtime.audit), name=f"host:{event.event_type}")
        link.tasks.append(task)
        task.add_done_callback(lambda t: link.tasks.remove(t) if t in link.tasks else None)

    adapter = MqttBridgeAdapter(client, runtime.signals, on_host_event=on_host_event)
    link = DeviceLink(client=client, adapter=adapter, router=router)
    try:
        await adapter.start()
        await client.wait_connected(connect_timeout_s, fail_fast=True)
    except BridgeUnreachable as exc:  # the endpoint has said why (one warning) and keeps retrying in the background
        runtime.audit.record("mqtt.not_connected_yet", url=settings.mqtt.url, reason=exc.code)
    except TimeoutError:
        log.warning("mqtt: not connected to %s after %.0f s; retrying in the background", settings.mqtt.url,
                    connect_timeout_s)
        runtime.audit.record("mqtt.not_connected_yet", url=settings.mqtt.url, reason="timeout")
    except BridgeAuthError as exc:
        await link.aclose()
        raise BridgeStartError(f"mqtt: bad credentials, {exc.message} (check [mqtt] username and "
                               "TOY_MQTT__PASSWORD)") from None
    except BridgeError as exc:
        await link.aclose()
        hint = _HINTS.get(exc.code)
        raise BridgeStartError(f"mqtt: {exc.message}" + (f" ({hint})" if hint else "")) from None
    return link


async def _dispatch(router: HostEventRouter, event: HostEvent, audit) -> None:
    try:
        await router.dispatch(event)
    except LookupError as exc:
        audit.record("host.unrouted", host_event_id=event.event_id, event_type=event.event_type, reason=str(exc))
    except Exception as exc:  # a runner bug must not kill the bridge
        audit.record("host.runner_failed", host_event_id=event.event_id, event_type=event.event_type, error=str(exc))
