"""Device-action ports: the speaker mixer (volume) and the session boundary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from ..errors import ToyError


@dataclass(frozen=True)
class MixerState:
    """Volume as the user thinks of it: 0..100 percent, plus mute."""

    level: int
    muted: bool


class MixerError(ToyError):
    """A mixer that cannot be opened or changed. `available` lists the controls that do exist."""

    code = "mixer_failed"

    def __init__(self, code: str, message: str, available: list[str] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.available = list(available or [])


class Mixer(Protocol):
    """The device-action port for output volume. Each call reads the level back from the device."""

    async def get(self) -> MixerState: ...

    async def set_level(self, percent: int) -> MixerState: ...

    async def set_muted(self, muted: bool) -> MixerState: ...


class SessionControl(Protocol):
    """The dialogue-session boundary: ending the current conversation."""

    async def end_session(self, reason: str | None, event_id: str) -> Mapping[str, Any]: ...
