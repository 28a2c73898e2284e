"""Adapter between the runtime and `firmware_bridge`: buttons and remote commands become host events, session state
and volume signals are mirrored to MQTT (retained), command results go back to the sender.

The adapter decides nothing: authorization of commands (which binding grants which capability) is the runtime's job;
it calls `publish_command_result` with the outcome.

    bridge = MqttBridgeAdapter(client, signals, on_host_event=router_dispatch)
    async with bridge:            # starts the client (if not started) and the named tasks
        ...
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Mapping

from toy_runtime.host.envelope import (
    ActorRef,
    AgentInput,
    DeliveryContext,
    EventSource,
    EventType,
    HostEvent,
    SubjectRef,
)
from toy_runtime.signals import Signal, SignalBus, StateSignal, VolumeSignal

log = logging.getLogger("toy_runtime.mqtt_bridge")

HostEventHandler = Callable[[HostEvent], Awaitable[None]]

try:  # firmware_bridge imports paho only when a client is built, so this import is cheap
    from firmware_bridge.client import BridgeClient, ConnectionState
    from firmware_bridge.protocol import ButtonEvent, Command, CommandStatus, FirmwareStatus
except ImportError as exc:  # pragma: no cover - firmware_bridge ships with toy-runtime
    raise ImportError("firmware_bridge is missing: pip install -e . (it ships with toy-runtime)") from exc


def button_event(device_id: str, button: ButtonEvent) -> HostEvent:
    """The `button.pressed` envelope of one firmware button event."""
    data: dict[str, Any] = {"action": button.action, "button": button.button}
    if button.seq is not None:
        data["seq"] = button.seq
    return HostEvent(
        event_type=EventType.BUTTON_PRESSED,
        source=EventSource(kind="firmware", name=device_id),
        actor=ActorRef(kind="user"),
        subject=SubjectRef(kind="button", id=button.button),
        input=AgentInput(data=data),
        metadata={"device_id": device_id, "firmware_ts": button.ts},
    )


def command_event(device_id: str, command: Command) -> HostEvent:
    """The `api.invoked` envelope of one remote command. Its event id derives from the command id, so a QoS 1
    redelivery of the same command is recognised by the kernel's idempotency."""
    return HostEvent(
        event_id=f"cmd_{device_id}_{command.command_id}",
        event_type=EventType.API_INVOKED,
        source=EventSource(kind="remote_api", name=device_id),
        actor=ActorRef(kind=command.actor, id=command.actor_id),
        subject=SubjectRef(kind="remote_command", id=command.command_id),
        input=AgentInput(data={"name": command.name, "arguments": dict(command.arguments),
                               "command_id": command.command_id}),
        delivery=DeliveryContext(surface="mqtt"),
        metadata={"device_id": device_id, "command_ts": command.ts, "expires_at": command.expires_at},
    )


class MqttBridgeAdapter:
    """Runs three named tasks over one BridgeClient: signal mirror, buttons → host events, commands → host events.

    `on_host_event` is awaited in arrival order per stream (press before release), so it should hand the event to the
    router and return quickly. If it raises for a command, the command is answered with status "failed".
    """

    def __init__(
        self,
        client: BridgeClient,
        signals: SignalBus,
        on_host_event: HostEventHandler,
        *,
        on_firmware_status: Callable[[FirmwareStatus], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.signals = signals
        self.on_host_event = on_host_event
        self.on_firmware_status = on_firmware_status
        self._tasks: list[asyncio.Task[None]] = []
        self._queue: asyncio.Queue[Signal] | None = None
        self._started_client = False

    @property
    def device_id(self) -> str:
        return self.client.device_id

    async def start(self) -> None:
        """Start the client (unless already started) and the adapter's tasks. Does not wait for the broker: signals
        published meanwhile are mirrored on connect."""
        if self._tasks:
            raise RuntimeError("MqttBridgeAdapter already started")
        if self.client.state is ConnectionState.STOPPED:
            await self.client.start()
            self._started_client = True
        self._queue = self.signals.subscribe()
        # Mirror what the bus already knows, so the LEDs and volume are right from the first connection.
        for last in list(self.signals.last.values()):
            await self._mirror(last)
        did = self.device_id
        self._tasks = [
            asyncio.create_task(self._mirror_signals(self._queue), name=f"mqtt-bridge-signals-{did}"),
            asyncio.create_task(self._pump_buttons(), name=f"mqtt-bridge-buttons-{did}"),
            asyncio.create_task(self._pump_commands(), name=f"mqtt-bridge-commands-{did}"),
        ]
        if self.on_firmware_status is not None:
            self._tasks.append(asyncio.create_task(self._pump_statuses(), name=f"mqtt-bridge-status-{did}"))

    async def stop(self, timeout_s: float = 3.0) -> None:
        """Cancel the tasks, unsubscribe from the bus and stop the client if this adapter started it (publishes
        `offline`)."""
        tasks, self._tasks = self._tasks, []
        try:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout_s)
        finally:
            if self._queue is not None:
                self.signals.unsubscribe(self._queue)
                self._queue = None
            if self._started_client:
                self._started_client = False
                await self.client.stop()

    async def __aenter__(self) -> "MqttBridgeAdapter":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def publish_command_result(
        self,
        command_id: str,
        status: CommandStatus,
        result: Mapping[str, Any] | None = None,
        error_code: str | None = None,
        error_message: str = "",
    ) -> bool:
        """Answer a command on `toy/<id>/command/result` (status ok/refused/failed/invalid)."""
        return await self.client.publish_command_result(
            command_id, status, dict(result or {}), error_code=error_code, error_message=error_message
        )

    # --- tasks ------------------------------------------------------------------------------------------------------

    async def _mirror(self, signal: Signal) -> None:
        if isinstance(signal, StateSignal):
            await self.client.publish_state(signal.state.value, signal.session_id, ts=round(signal.ts, 3))
        elif isinstance(signal, VolumeSignal):
            await self.client.publish_volume(signal.level, signal.muted, signal.event_id, ts=round(signal.ts, 3))

    async def _mirror_signals(self, queue: asyncio.Queue[Signal]) -> None:
        while True:
            signal = await queue.get()
            try:
                await self._mirror(signal)
            except Exception:  # a bad signal must not end the mirror
                log.exception("could not mirror %r to MQTT", signal)

    async def _pump_buttons(self) -> None:
        async for button in self.client.buttons():
            try:
                await self.on_host_event(button_event(self.device_id, button))
            except Exception:
                log.exception("host event handler failed for button %s", button.action)

    async def _pump_commands(self) -> None:
        async for command in self.client.commands():
            try:
                await self.on_host_event(command_event(self.device_id, command))
            except Exception as exc:
                # %r: a command id is the sender's text (a newline in it must not forge a log line)
                log.exception("host event handler failed for command %r", command.command_id)
                await self.publish_command_result(
                    command.command_id, "failed", error_code="internal_error", error_message=type(exc).__name__
                )

    async def _pump_statuses(self) -> None:
        assert self.on_firmware_status is not None
        async for status in self.client.statuses():
            try:
                await self.on_firmware_status(status)
            except Exception:
                log.exception("firmware status handler failed")
