"""The firmware side of the bridge (used by `firmware-sim` and the tests): sends buttons and status, receives the LED
state, the volume signal and the runtime's presence."""

from __future__ import annotations

from typing import AsyncIterator

from . import protocol as p
from .config import BridgeConfig
from .endpoint import MqttEndpoint


class FirmwareClient(MqttEndpoint):
    """Speaks the device half of the protocol for `toy/<device_id>/...`."""

    role = "firmware"

    def __init__(self, config: BridgeConfig) -> None:
        super().__init__(config)
        self._states = self._inbox("states")
        self._volumes = self._inbox("volumes")
        self._presence = self._inbox("presence")
        self._seq = 0
        self.last_state: p.StateMessage | None = None
        self.last_volume: p.VolumeMessage | None = None
        self.runtime_online: bool | None = None

    def _subscriptions(self) -> list[str]:
        t = self.topics
        return [t.state, t.volume, t.online]

    def _on_payload(self, topic: str, payload: bytes, retained: bool, expiry_s: int | None = None) -> None:
        suffix = self.topics.suffix_of(topic)
        try:
            if suffix == p.STATE:
                state = p.parse_state(payload)
                self.last_state = state
                self._deliver(self._states, state)
            elif suffix == p.VOLUME:
                volume = p.parse_volume(payload)
                self.last_volume = volume
                self._deliver(self._volumes, volume)
            elif suffix == p.PRESENCE:
                online = p.parse_online(payload)
                self.runtime_online = online
                self._deliver(self._presence, online)
        except p.ProtocolError as exc:
            self._drop_bad(topic, exc)

    def states(self) -> AsyncIterator[p.StateMessage]:
        """LED state updates (the retained one first); ends when the client stops."""
        return self._states.__aiter__()

    def volumes(self) -> AsyncIterator[p.VolumeMessage]:
        """Volume signals (the retained one first)."""
        return self._volumes.__aiter__()

    def presence(self) -> AsyncIterator[bool]:
        """The runtime's presence: True online, False offline."""
        return self._presence.__aiter__()

    async def next_state(self) -> p.StateMessage:
        return await self._states.get()

    async def next_volume(self) -> p.VolumeMessage:
        return await self._volumes.get()

    async def next_presence(self) -> bool:
        return await self._presence.get()

    async def press(self, action: p.ButtonAction, button: str = "talk", ts: float | None = None) -> bool:
        """Send one button event (QoS 1, not retained; queued while disconnected)."""
        self._seq += 1
        event = p.ButtonEvent(action=action, button=button, seq=self._seq, ts=ts)
        return self._publish(self.topics.button, p.encode(event), retain=False)

    async def send_status(self, battery_pct: int, charging: bool = False, firmware_version: str = "") -> bool:
        """Publish the retained firmware status."""
        status = p.FirmwareStatus(battery_pct=battery_pct, charging=charging, firmware_version=firmware_version)
        return self._publish(self.topics.firmware_status, p.encode(status), retain=True)

    async def send_raw(self, suffix: str, payload: bytes, retain: bool = False) -> bool:
        """Publish arbitrary bytes on one of this device's topics (protocol tests: malformed payloads)."""
        return self._publish(self.topics.topic(suffix), payload, retain=retain)
