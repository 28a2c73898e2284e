"""The console as the commands see it: made before the runtime (its audit tap goes into `build_runtime`), attached
to the runtime (speech observer, next-turn overrides), started once the command knows how to end its session,
closed in the command's `finally`.

    console = build_console(settings, "chat")                  # app/runtime.py; None when `[web] listen` is unset
    runtime = build_runtime(settings, audit_tap=console and console.audit_tap)
    console.attach(runtime)
    await console.start(end_session=..., send_message=...)
    ...
    await console.aclose()
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any, Callable, TextIO, cast

from ..config import Settings
from ..audit import AuditKind
from ..errors import StartError
from ..config_values import is_loopback, parse_listen
from .controls import Controls, TurnOverrides, bind_console
from .hub import ConsoleHub
from .parts import ConsoleParts
from .tap import AuditTap, MeteredSource, SpeechTap, cancel_quietly, pump_signals

if TYPE_CHECKING:
    from .server import ConsoleServer  # aiohttp: imported when the console starts

__all__ = ["WebConsole"]

MQTT_POLL_S = 1.0


class WebConsole:
    """One command's live console."""

    def __init__(self, settings: Settings, command: str) -> None:
        self.settings = settings
        self.command = command
        self.hub = ConsoleHub()
        self.speech = SpeechTap(self.hub)
        self.audit_tap = AuditTap(self.hub, self.speech)
        self.runtime: ConsoleParts | None = None  # app.runtime.Runtime (a floor above this one)
        self.overrides: TurnOverrides | None = None
        self.server: ConsoleServer | None = None
        self._link = None
        self._tasks: list[asyncio.Task] = []

    def attach(self, runtime: ConsoleParts) -> None:
        """Observe the runtime's turns and let the console choose the mode and events of the next turn."""
        self.runtime = runtime
        self.overrides = TurnOverrides(runtime)
        runtime.turn_observer = self.speech
        runtime.before_turn = self.overrides.apply

    def metered(self, source):
        """The microphone, sending its level to the pages while one is open."""
        return MeteredSource(source, self.hub)

    def show_ears(self, lines: list[str]) -> None:
        """Show the capture front end's state (echo cancellation, noise suppression, wake word, barge-in)."""
        self.hub.update_status(ears="; ".join(lines))

    def watch_link(self, link) -> None:
        """Show the MQTT link's state (the firmware bridge)."""
        self._link = link

    async def start(self, *, end_session: Callable[[], None], send_message: Callable[[str], None] | None = None,
                    stream: TextIO | None = None) -> None:
        """Serve the page; StartError (exit 2) when the address cannot be bound or aiohttp is missing."""
        try:
            from .server import ConsoleServer
        except ImportError as exc:
            raise StartError(f"web.listen: the console needs aiohttp ({exc.name} is missing): "
                             "pip install 'toy-runtime[web]'") from None

        runtime = self.runtime
        if runtime is None:
            raise StartError("the console was started before a runtime was attached to it")
        settings = self.settings
        host, port = parse_listen(cast(str, settings.web.listen))  # set: a console is built only then
        token = settings.web.token.get_secret_value() if settings.web.token else None
        self.hub.bind_loop(asyncio.get_running_loop())
        bind_console(runtime.router, runtime, end_session=end_session)  # the volume and the end take the router
        controls = Controls(runtime, cast(TurnOverrides, self.overrides), send_message=send_message)
        from ..metrics.turns import TEXT_STAGES, VOICE_STAGES

        mixer = await runtime.mixer.get()
        mqtt = settings.mqtt
        self.hub.status.update({
            "command": self.command, "state": "idle", "session_id": None,
            "volume": {"level": mixer.level, "muted": mixer.muted},
            "overrides": cast(TurnOverrides, self.overrides).describe(), "can_message": send_message is not None,
            "stages": {"voice": VOICE_STAGES, "text": TEXT_STAGES},  # the waterfall's labels, as in `report`
            # the broker's address and device only: never the username or password
            "mqtt": {"configured": bool(mqtt.url), "url": mqtt.url, "device_id": mqtt.device_id,
                     "state": "not configured" if not mqtt.url else "connecting"},
        })
        self.server = ConsoleServer(self.hub, controls, runtime.audit, host=host, port=port, token=token,
                                    loopback=is_loopback(host), header_timeout_s=settings.web.header_timeout_s,
                                    max_connections=settings.web.max_connections)
        try:
            await self.server.start()
        except OSError as exc:
            self.server = None
            raise StartError(f"web.listen: cannot serve the console on {settings.web.listen}: "
                             f"{exc.strerror or exc}") from None
        self._tasks.append(asyncio.create_task(pump_signals(runtime.signals, self.hub), name="console:signals"))
        if mqtt.url:
            self._tasks.append(asyncio.create_task(self._watch_mqtt(), name="console:mqtt"))
        runtime.audit.record(AuditKind.CONSOLE_STARTED, url=self.server.url, token_required=token is not None)
        hint = " (open it with ?token=… from TOY_WEB__TOKEN)" if token else ""
        print(f"console: {self.server.url}{hint}", file=stream or sys.stderr, flush=True)

    async def _watch_mqtt(self) -> None:
        """The link state, read from memory once a second while a page is open (no I/O)."""
        shown = None
        while True:
            await asyncio.sleep(MQTT_POLL_S)
            if self._link is None or not self.hub.has_clients:
                continue
            state = str(getattr(self._link.client, "state", "unknown"))
            if state != shown:
                shown = state
                self.hub.update_status(mqtt={**self.hub.status["mqtt"], "state": state})

    async def aclose(self) -> None:
        for task in self._tasks:
            await cancel_quietly(task)
        self._tasks.clear()
        if self.server is not None:
            await self.server.aclose()
            self.server = None
