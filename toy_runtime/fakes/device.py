"""In-memory device ports: a mixer and a session boundary that record every call."""

from __future__ import annotations

from typing import Any, Mapping

from ..ports.device import MixerError, MixerState


class MemoryMixer:
    """A Mixer kept in memory. Every call is appended to `calls` as a tuple ("get",) / ("set_level", 30) / ...

    `error` (a MixerError) is raised by every call while set, to exercise failure paths; `fail_on` limits it to
    the named methods (e.g. {"set_level"}).
    """

    def __init__(self, level: int = 50, muted: bool = False, *, error: MixerError | None = None,
                 fail_on: set[str] | None = None) -> None:
        if not 0 <= level <= 100:
            raise ValueError("level must be 0..100")
        self.level = level
        self.muted = muted
        self.error = error
        self.fail_on = set(fail_on) if fail_on is not None else None
        self.calls: list[tuple[Any, ...]] = []

    def _maybe_fail(self, method: str) -> None:
        if self.error is not None and (self.fail_on is None or method in self.fail_on):
            raise self.error

    def _state(self) -> MixerState:
        return MixerState(level=self.level, muted=self.muted)

    @property
    def changes(self) -> list[tuple[Any, ...]]:
        """Only the calls that change something (set_level / set_muted)."""
        return [c for c in self.calls if c[0] != "get"]

    async def get(self) -> MixerState:
        """The current state."""
        self.calls.append(("get",))
        self._maybe_fail("get")
        return self._state()

    async def set_level(self, percent: int) -> MixerState:
        """Set the level, clamped to 0..100 like a real device would."""
        self.calls.append(("set_level", percent))
        self._maybe_fail("set_level")
        self.level = max(0, min(100, int(percent)))
        return self._state()

    async def set_muted(self, muted: bool) -> MixerState:
        """Mute or unmute."""
        self.calls.append(("set_muted", bool(muted)))
        self._maybe_fail("set_muted")
        self.muted = bool(muted)
        return self._state()


class MemorySessionControl:
    """A SessionControl that records end_session calls and is idempotent by event id.

    `calls` holds every (reason, event_id) received; `ended` counts real terminations (a repeated event id
    returns the first result without ending again). `error` is raised when set.
    """

    def __init__(self, *, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[tuple[str | None, str]] = []
        self.ended = 0
        self._results: dict[str, dict[str, Any]] = {}

    async def end_session(self, reason: str | None, event_id: str) -> Mapping[str, Any]:
        """End the session once per event id; return {"terminated": True, "reason": ..., "event_id": ...}."""
        self.calls.append((reason, event_id))
        if self.error is not None:
            raise self.error
        if event_id not in self._results:
            self.ended += 1
            self._results[event_id] = {"terminated": True, "reason": reason, "event_id": event_id}
        return dict(self._results[event_id])
