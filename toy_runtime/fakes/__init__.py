"""In-memory implementations of the ports, shipped in the package for tests, demos and `events resolve`."""

from __future__ import annotations

from ..ports.clock import Clock
from ..signals import SignalBus
from .calendar import MemoryCalendarStore
from .clock import ManualClock
from .device import MemoryMixer, MemorySessionControl
from .search import StaticSearch
from .wake import NeverWakes, ScriptedWakeWord


def memory_ports(*, signals: SignalBus | None = None, clock: Clock | None = None, volume_step: int = 10):
    """PluginPorts backed entirely by in-memory fakes (a fresh set on every call)."""
    from ..plugins import PluginPorts  # imported here: plugins must not depend on fakes, only the reverse

    return PluginPorts(
        session=MemorySessionControl(),
        mixer=MemoryMixer(),
        calendar=MemoryCalendarStore(clock),
        search=StaticSearch(clock=clock),
        signals=signals,
        volume_step=volume_step,
    )


__all__ = ["ManualClock", "MemoryCalendarStore", "MemoryMixer", "MemorySessionControl", "NeverWakes",
           "ScriptedWakeWord", "StaticSearch", "memory_ports"]
