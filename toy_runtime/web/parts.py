"""What the debug console uses of the runtime, as a Protocol: the console sits a floor below the composition root
(app/runtime.py `Runtime`), so it names the parts it reads and the two taps it sets, and mypy checks at the one
call site (`console.attach(runtime)`) that the runtime has them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from ..agent.chat_agent import ChatAgent
    from ..audit import AuditSink
    from ..config import Settings
    from ..events import EventKernel, EventRegistry
    from ..host.envelope import HostEventRouter
    from ..ports.clock import Clock
    from ..ports.device import Mixer
    from ..session.items import TurnItem
    from ..session.turn import TurnRunner
    from ..signals import SignalBus

__all__ = ["ConsoleParts"]


class ConsoleParts(Protocol):
    """The runtime as the console sees it: what it reads, and the two taps it installs."""

    settings: Settings
    audit: AuditSink
    clock: Clock
    kernel: EventKernel
    registry: EventRegistry
    router: HostEventRouter
    mixer: Mixer
    signals: SignalBus
    chat_agent: ChatAgent | None
    turn_observer: Callable[[str, TurnItem], None] | None
    before_turn: Callable[[TurnRunner], None] | None
