"""The runtime side of the bridge: receives buttons, firmware status and remote commands; publishes LED state, the
volume signal, command results and its own presence (`online`, last will `offline`).

    client = BridgeClient(BridgeConfig(url="mqtt://127.0.0.1:1883", device_id="toy1"))
    await client.start()
    await client.wait_connected(timeout=5)
    async for button in client.buttons(): ...
    await client.publish_state("listening", session_id="s1")
    await client.stop()
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

from . import protocol as p
from .config import BridgeConfig, MqttUrl, parse_mqtt_url
from .endpoint import BridgeAuthError, BridgeError, ConnectionState, EndpointStats, MqttEndpoint

__all__ = [
    "BridgeAuthError", "BridgeClient", "BridgeConfig", "BridgeError", "ConnectionState", "EndpointStats", "MqttUrl",
    "parse_mqtt_url",
]


def with_message_expiry(command: p.Command, expiry_s: int | None, now: float | None = None) -> p.Command:
    """`command` with `expires_at` no later than the end of its MQTT 5 message expiry (the broker delivers what is
    left of the interval): the earlier of the two deadlines wins, so a command cannot outlive either."""
    if expiry_s is None:
        return command
    deadline = round((time.time() if now is None else now) + expiry_s, 3)
    if command.expires_at is not None and command.expires_at <= deadline:
        return command
    return command.model_copy(update={"expires_at": deadline})


class BridgeClient(MqttEndpoint):
    """The toy runtime's MQTT client for one device (`toy/<device_id>/...`)."""

    role = "runtime"

    def __init__(self, config: BridgeConfig) -> None:
        super().__init__(config)
        self._buttons = self._inbox("buttons")
        self._statuses = self._inbox("statuses")
        self._commands = self._inbox("commands")
        self.last_status: p.FirmwareStatus | None = None  # latest battery/firmware facts

    # --- endpoint hooks ---------------------------------------------------------------------------------------------

    def _subscriptions(self) -> list[str]:
        t = self.topics
        return [t.button, t.firmware_status, t.command]

    def _will(self) -> tuple[str, bytes]:
        return self.topics.online, p.OFFLINE.encode()

    def _on_ready_publish(self) -> list[tuple[str, bytes]]:
        return [(self.topics.online, p.ONLINE.encode())]

    def _on_stop_publish(self) -> list[tuple[str, bytes]]:
        return [(self.topics.online, p.OFFLINE.encode())]

    def _on_payload(self, topic: str, payload: bytes, retained: bool, expiry_s: int | None = None) -> None:
        suffix = self.topics.suffix_of(topic)
        if retained and suffix in (p.BUTTON, p.COMMAND):
            # A retained button or command would replay on every reconnect: never act on one.
            self.stats.ignored += 1
            self._bad_log.warning("ignored a retained message on %s (buttons and commands must not be retained)",
                                  topic)
            return
        try:
            if suffix == p.BUTTON:
                self._deliver(self._buttons, p.parse_button(payload))
            elif suffix == p.FIRMWARE_STATUS:
                status = p.parse_firmware_status(payload)
                self.last_status = status
                self._deliver(self._statuses, status)
            elif suffix == p.COMMAND:
                self._deliver(self._commands, with_message_expiry(p.parse_command(payload), expiry_s))
            else:
                raise p.ProtocolError("unknown_topic", f"not subscribed to {topic!r}")
        except p.ProtocolError as exc:
            self._drop_bad(topic, exc)
            if suffix == p.COMMAND and exc.command_id:
                # The sender named its command: tell it why nothing happened instead of leaving it waiting (an id
                # over the limit is answered with its first MAX_ID_CHARS characters, see protocol.answerable_id).
                bad = p.command_error(exc.command_id, exc.code, exc.message, status="invalid")
                self._publish(self.topics.command_result, p.encode(bad), retain=False)

    # --- inbound streams (single consumer each) ---------------------------------------------------------------------

    def buttons(self) -> AsyncIterator[p.ButtonEvent]:
        """Button events in arrival order; ends when the client stops."""
        return self._buttons.__aiter__()

    def statuses(self) -> AsyncIterator[p.FirmwareStatus]:
        """Firmware status updates; ends when the client stops."""
        return self._statuses.__aiter__()

    def commands(self) -> AsyncIterator[p.Command]:
        """Remote commands (already validated); ends when the client stops."""
        return self._commands.__aiter__()

    async def next_button(self) -> p.ButtonEvent:
        """The next button event (EOFError once stopped)."""
        return await self._buttons.get()

    async def next_command(self) -> p.Command:
        """The next command (EOFError once stopped)."""
        return await self._commands.get()

    # --- outbound ---------------------------------------------------------------------------------------------------

    async def publish_state(self, state: str, session_id: str | None = None, ts: float | None = None) -> bool:
        """Retained LED state (`idle`/`listening`/`thinking`/`speaking`/`closed`). True if sent now, False if it
        will be sent on reconnect."""
        extra: dict[str, Any] = {"ts": ts} if ts is not None else {}
        message = p.StateMessage(state=state, session_id=session_id, **extra)
        return self._publish(self.topics.state, p.encode(message), retain=True)

    async def publish_volume(
        self, level: int, muted: bool, event_id: str | None = None, ts: float | None = None
    ) -> bool:
        """Retained volume signal (read back from the mixer)."""
        extra: dict[str, Any] = {"ts": ts} if ts is not None else {}
        message = p.VolumeMessage(level=level, muted=muted, event_id=event_id, **extra)
        return self._publish(self.topics.volume, p.encode(message), retain=True)

    async def publish_command_result(
        self,
        command_id: str | p.CommandResult,
        status: p.CommandStatus = "ok",
        result: dict[str, Any] | None = None,
        error_code: str | None = None,
        error_message: str = "",
    ) -> bool:
        """Reply on `command/result` (not retained; queued while disconnected). Pass a CommandResult or its fields."""
        if isinstance(command_id, p.CommandResult):
            message = command_id
        else:
            error = p.CommandErrorInfo(code=error_code, message=error_message) if error_code else None
            message = p.CommandResult(command_id=command_id, status=status, result=result or {}, error=error)
        return self._publish(self.topics.command_result, p.encode(message), retain=False)
