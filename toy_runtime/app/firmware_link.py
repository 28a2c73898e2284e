"""Connecting the runtime to the toy's firmware over MQTT (composition: it picks the MQTT adapter).

- Session states and volume signals on the SignalBus are mirrored to MQTT by the bridge adapter.
- What the firmware sends arrives as host events on the runtime's one router; the runners (buttons, remote
  commands) are in `host/firmware_events.py`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..errors import StartError
from ..host.envelope import EventType, HostEvent, HostEventRouter
from ..host.firmware_events import ButtonHandler, bind_firmware, dispatch_audited
from ..audit.kinds import AuditKind

log = logging.getLogger("toy_runtime.app.firmware_link")

# Which setting fixes a permanent bridge failure (firmware_bridge names the cause, not our config keys).
_HINTS = {
    "tls_certificate": "set [mqtt] ca_file to the CA that signed the broker's certificate",
    "tls_config": "check [mqtt] ca_file",
    "tls_handshake": "check [mqtt] url and ca_file",
    "tls_required": "check [mqtt] url",
    "tls_not_spoken": "check [mqtt] url",
    "password_file": "check [mqtt] password_file",
}


# Remote commands handled at once; more are refused `busy` at once. A stranger on the broker must not pile up tasks
# (each holds a kernel batch for up to its deadline), and buttons are never counted: the child's talk button works
# whatever the app sends.
MAX_COMMANDS_IN_FLIGHT = 16


class BridgeStartError(StartError):
    """The bridge cannot connect and retrying would not help (bad credentials, untrusted certificate, TLS on one end
    only): one line for the user, exit 2."""

    code = "bridge_start_failed"


@dataclass
class DeviceLink:
    """A running bridge: the client, the adapter and the router feeding host events to their runners."""

    client: Any
    adapter: Any
    router: HostEventRouter
    tasks: list[asyncio.Task] = field(default_factory=list)
    grace_s: float = 2.0  # how long in-flight remote commands may take to finish and answer at close
    max_commands: int = MAX_COMMANDS_IN_FLIGHT
    commands: set[asyncio.Task] = field(default_factory=set)  # the remote commands among `tasks`

    async def aclose(self) -> None:
        tasks, self.tasks = list(self.tasks), []
        if tasks:
            # A remote `session.terminate` is what closes the console: its `ok` must still reach the sender. What
            # is still running after the grace is cancelled, before the runtime under it closes.
            await asyncio.wait(tasks, timeout=self.grace_s)
        for task in tasks:
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
                        password_file=str(m.password_file) if m.password_file else None, ca_file=str(m.ca_file) if m.ca_file else None, protocol=m.protocol,
                        keepalive_s=m.keepalive_s)


async def start_device_link(runtime, *, on_button: ButtonHandler | None = None, connect_timeout_s: float = 5.0,
                            max_commands: int = MAX_COMMANDS_IN_FLIGHT) -> DeviceLink:
    """Connect the bridge, wire the router, and wait until connected or the first failed attempt.

    BridgeStartError for what retrying cannot fix (credentials, certificate, TLS/plain mismatch). A broker that is
    not there yet (refused, timed out) is one warning; the bridge keeps retrying in the background."""
    from firmware_bridge.client import BridgeAuthError, BridgeClient, BridgeError
    from firmware_bridge.endpoint import BridgeUnreachable

    from ..adapters.mqtt_bridge import MqttBridgeAdapter

    settings = runtime.settings
    client = BridgeClient(bridge_config(settings))
    router = runtime.router

    async def publish_result(command_id, **kw):
        await adapter.publish_command_result(command_id, **kw)

    bind_firmware(router, runtime.kernel, runtime.audit, runtime.clock, runtime.settings, publish_result,
                  on_button=on_button)

    async def on_host_event(event: HostEvent) -> None:
        command = event.event_type == EventType.API_INVOKED
        expires_at = event.metadata.get("expires_at") if command else None
        if expires_at is not None and runtime.clock.now().timestamp() > expires_at:
            # queued while the toy was offline (or stuck in a queue): too late to act on, whatever it asks
            command_id = str(event.input.data.get("command_id", event.event_id))
            runtime.audit.record(AuditKind.REMOTE_REFUSED, host_event_id=event.event_id, command_id=command_id,
                                 name=event.input.data.get("name"), reason="expired", expires_at=expires_at)
            await publish_result(command_id, status="refused", error_code="expired",
                                 error_message=f"the command expired at {expires_at:.3f} (epoch s) before it could run")
            return
        if command and len(link.commands) >= link.max_commands:
            command_id = str(event.input.data.get("command_id", event.event_id))
            runtime.audit.record(AuditKind.REMOTE_REFUSED, host_event_id=event.event_id, command_id=command_id,
                                 name=event.input.data.get("name"), reason="busy", in_flight=len(link.commands))
            await publish_result(command_id, status="refused", error_code="busy",
                                 error_message=f"{link.max_commands} commands are already running; try again later")
            return
        # hand off at once: the adapter delivers events in order and must not wait for a kernel batch
        task = asyncio.create_task(dispatch_audited(router, event, runtime.audit, publish_result), name=f"host:{event.event_type}")
        link.tasks.append(task)
        if command:
            link.commands.add(task)
        task.add_done_callback(forget)

    def forget(task: asyncio.Task) -> None:
        link.commands.discard(task)
        if task in link.tasks:
            link.tasks.remove(task)

    adapter = MqttBridgeAdapter(client, runtime.signals, on_host_event=on_host_event)
    link = DeviceLink(client=client, adapter=adapter, router=router, max_commands=max_commands)
    try:
        await adapter.start()
        await client.wait_connected(connect_timeout_s, fail_fast=True)
    except BridgeUnreachable as exc:  # the endpoint has said why (one warning) and keeps retrying in the background
        runtime.audit.record(AuditKind.MQTT_NOT_CONNECTED_YET, url=settings.mqtt.url, reason=exc.code)
    except TimeoutError:
        log.warning("mqtt: not connected to %s after %.0f s; retrying in the background", settings.mqtt.url,
                    connect_timeout_s)
        runtime.audit.record(AuditKind.MQTT_NOT_CONNECTED_YET, url=settings.mqtt.url, reason="timeout")
    except BridgeAuthError as exc:
        await link.aclose()
        raise BridgeStartError(f"mqtt: bad credentials, {exc.message} (check [mqtt] username and "
                               "TOY_MQTT__PASSWORD)") from None
    except BridgeError as exc:
        await link.aclose()
        hint = _HINTS.get(exc.code)
        raise BridgeStartError(f"mqtt: {exc.message}" + (f" ({hint})" if hint else "")) from None
    return link


async def start_link(runtime, console=None, *, on_button: ButtonHandler | None = None) -> DeviceLink | None:
    """The MQTT link when `[mqtt] url` is set, else None; the web console (if any) is told either way. Every
    command (`run`/`ptt`, `demo`, `chat`) starts the link through here."""
    link = await start_device_link(runtime, on_button=on_button) if runtime.settings.mqtt.url else None
    if console is not None:
        console.watch_link(link)
    return link
