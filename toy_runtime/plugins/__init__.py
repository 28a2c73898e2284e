"""The four built-in event plugins, one module each, bound to ports at start-up.

    ports = PluginPorts(session=..., mixer=..., calendar=..., search=..., signals=bus)
    registry = default_registry(ports)          # flat EventRegistry for EventKernel

Plugins import only `events/` and `ports/`; the composition root chooses the adapters behind the ports
(toy_runtime.fakes.memory_ports() gives in-memory ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events.definition import EventDefinition
from ..events.registry import EventRegistry
from ..ports.calendar import CalendarStore
from ..ports.device import Mixer, SessionControl
from ..ports.search import SearchProvider
from ..signals import SignalBus
from . import calendar_schedule, device_volume, session_terminate, web_search
from .timeparse import DEFAULT_DAYPARTS, DayParts


@dataclass(frozen=True)
class PluginPorts:
    """The ports the built-in plugins act through.

    `volume_step` is the change, in percentage points, for "a bit louder"/"quieter" without a number.
    `dayparts` are the household's times for "tomorrow morning" & co. (`[calendar] morning = "08:00"`, …).
    """

    session: SessionControl
    mixer: Mixer
    calendar: CalendarStore
    search: SearchProvider | None  # None: search is off (the event is registered, unadvertised, honest)
    signals: SignalBus | None = None
    volume_step: int = device_volume.DEFAULT_STEP
    search_results: int = web_search.DEFAULT_RESULTS  # sources fetched when the request does not say
    dayparts: DayParts = field(default_factory=lambda: dict(DEFAULT_DAYPARTS))


def builtin_definitions(ports: PluginPorts) -> list[EventDefinition]:
    """The four built-in definitions, in catalog order."""
    return [
        session_terminate.definition(ports.session),
        device_volume.definition(ports.mixer, ports.signals, step=ports.volume_step),
        calendar_schedule.definition(ports.calendar, dayparts=ports.dayparts),
        (web_search.definition(ports.search, default_results=ports.search_results) if ports.search is not None
         else web_search.unavailable_definition()),
    ]


def default_registry(ports: PluginPorts) -> EventRegistry:
    """A flat registry holding the built-in definitions."""
    return EventRegistry(builtin_definitions(ports))


__all__ = ["PluginPorts", "builtin_definitions", "default_registry"]
