"""What the console may change: the mode and the enabled events from the next turn on, the volume (through the
kernel, exactly like the child's request), the end of the session, and (in `chat`) a typed message.

Every control is audited as `console.control` with who asked and what came of it.
"""

from __future__ import annotations

import copy
import itertools
from datetime import datetime
from typing import Any, Callable
from zoneinfo import ZoneInfo

from ..events import EventRequest, ResolveContext, SourceProtocol

__all__ = ["ControlError", "Controls", "TurnOverrides", "MODES", "VOLUME_EVENT"]

MODES = ("dual_agent", "chat_agent_tools")
VOLUME_EVENT = "device.volume.adjust"


class ControlError(ValueError):
    """A control request that cannot be carried out (bad value, unavailable here): answered with 400."""


class TurnOverrides:
    """The mode and enabled events the console chose; the turn runner reads them as each turn starts.

    A turn already running keeps what it started with. The kernel keeps its shared concurrency limits, locks and
    idempotency store: a restricted view only stops knowing the disabled events (so neither the model nor the
    offline gate can run them). The speakable guard keeps every event name hidden from speech.
    """

    def __init__(self, runtime) -> None:
        self.chat = runtime.chat_agent
        self.kernel = runtime.kernel
        self.audit = runtime.audit
        self.available: tuple[str, ...] = tuple(d.name for d in runtime.registry)
        self.default_mode = self.chat.mode if self.chat is not None else None
        self.mode = self.default_mode
        self.enabled: tuple[str, ...] = self.available
        self._variants: dict[tuple, tuple] = {}

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ControlError(f"mode must be one of {', '.join(MODES)}")
        if self.chat is None:
            raise ControlError("offline (no LLM endpoint): the offline gate answers in every mode")
        self.mode = mode

    def set_enabled(self, names) -> None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ControlError("events must be a list of event names")
        unknown = sorted(set(names) - set(self.available))
        if unknown:
            raise ControlError(f"unknown events: {', '.join(unknown)}")
        self.enabled = tuple(n for n in self.available if n in names)

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode or "offline", "events_enabled": list(self.enabled),
                "events_available": list(self.available)}

    def apply(self, runner) -> None:
        """`before_turn`: give the runner the chosen ChatAgent, kernel and gate for the turn it starts now."""
        from ..session.gate import OfflineGate

        key = (self.mode, self.enabled)
        if key == (self.default_mode, self.available):
            chat, kernel = self.chat, self.kernel
        else:
            if key not in self._variants:
                self._variants[key] = self._variant()
            chat, kernel = self._variants[key]
        if runner.kernel is not kernel:
            runner.gate = OfflineGate(kernel.registry, runner.audit)
        runner.chat, runner.kernel = chat, kernel

    def _variant(self) -> tuple:
        registry = self.kernel.registry.subset(self.enabled)
        kernel = copy.copy(self.kernel)  # shares semaphore, locks and idempotency with the real one
        kernel.registry = registry
        kernel.definitions = {d.name: d for d in registry}
        chat = None
        if self.chat is not None:
            chat = copy.copy(self.chat)
            chat.mode, chat.registry = self.mode, registry  # speakable_rules stay those of every event
        return chat, kernel


class Controls:
    """The console's actions on a running runtime."""

    def __init__(self, runtime, overrides: TurnOverrides, *, end_session: Callable[[], None],
                 send_message: Callable[[str], None] | None = None) -> None:
        self.runtime = runtime
        self.overrides = overrides
        self.end_session = end_session
        self.send_message = send_message
        self._ids = itertools.count(1)

    async def run(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """Carry out one control; returns what the page shows. ControlError for a request that cannot be done."""
        if action == "volume":
            return await self._volume(body.get("level"))
        if action == "mode":
            self.overrides.set_mode(str(body.get("mode")))
            return {"ok": True, **self.overrides.describe()}
        if action == "events":
            self.overrides.set_enabled(body.get("enabled"))
            return {"ok": True, **self.overrides.describe()}
        if action == "end":
            self.end_session()
            return {"ok": True}
        if action == "message":
            text = body.get("text")
            if self.send_message is None:
                raise ControlError("typing a message works in `toy-runtime chat` only")
            if not isinstance(text, str) or not text.strip() or len(text) > 2000:
                raise ControlError("text must be 1-2000 characters")
            self.send_message(text.strip())
            return {"ok": True}
        raise ControlError(f"unknown control {action!r}")

    async def _volume(self, level: Any) -> dict[str, Any]:
        """device.volume.adjust through the kernel, as a host request: resolved, validated, audited, signalled."""
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 100:
            raise ControlError("level must be an integer 0-100")
        runtime = self.runtime
        kernel = runtime.kernel
        if kernel.registry.lookup(VOLUME_EVENT) is None:
            raise ControlError(f"{VOLUME_EVENT} is not enabled in this runtime")
        zone = runtime.settings.session.timezone
        context = ResolveContext(utterance="", request_time=datetime.now(ZoneInfo(zone)), timezone=zone)
        request = EventRequest(name=VOLUME_EVENT, turn_id=f"console.{next(self._ids)}", source=SourceProtocol.HOST,
                               arguments={"mode": "absolute", "value": level})
        run = kernel.open_batch("console", request.turn_id, context)
        run.add(request)
        run.close()
        outcome = await run.wait()
        result = outcome.results[0] if outcome.results else None
        if result is None:
            return {"ok": False, "status": "dropped"}
        return {"ok": result.ok, "status": result.status.value, "event_id": result.event_id,
                "result": dict(result.result), "error": result.error}
