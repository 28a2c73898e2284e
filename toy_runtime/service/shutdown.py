"""Map SIGTERM/SIGINT to one graceful-stop callback on the asyncio loop (systemd stops units with SIGTERM)."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field
from typing import Callable

log = logging.getLogger(__name__)

SHUTDOWN_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)


@dataclass
class ShutdownHandlers:
    """The installed handlers: which signal arrived first, and `remove()` to restore the defaults."""

    loop: asyncio.AbstractEventLoop
    signals: tuple[signal.Signals, ...]
    received: signal.Signals | None = field(default=None)

    def remove(self) -> None:
        """Uninstall the handlers (Python's defaults return: SIGINT → KeyboardInterrupt, SIGTERM → terminate)."""
        for sig in self.signals:
            self.loop.remove_signal_handler(sig)


def install_shutdown_handlers(loop: asyncio.AbstractEventLoop, on_shutdown: Callable[[], None],
                              signals: tuple[signal.Signals, ...] = SHUTDOWN_SIGNALS) -> ShutdownHandlers:
    """Call `on_shutdown()` on the loop for the first SIGTERM/SIGINT; later ones are logged and ignored.

    The callback runs as a normal loop callback (not inside a C signal handler), so it may set events and cancel
    tasks. It is called once: a second signal during a graceful stop must not restart the stop; systemd's
    TimeoutStopSec ends with SIGKILL if the stop hangs. Unix only (loop.add_signal_handler).
    """
    handlers = ShutdownHandlers(loop=loop, signals=tuple(signals))

    def _on_signal(sig: signal.Signals) -> None:
        if handlers.received is not None:
            log.warning("%s during shutdown (after %s): already stopping", sig.name, handlers.received.name)
            return
        handlers.received = sig
        log.info("%s: stopping gracefully", sig.name)
        on_shutdown()

    for sig in handlers.signals:
        loop.add_signal_handler(sig, _on_signal, sig)
    return handlers
