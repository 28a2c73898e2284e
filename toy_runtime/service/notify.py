"""`ServiceNotifier`: tells systemd (Type=notify) when the runtime is ready, what it is doing, and that it is alive.

The datagrams are sent by the kept `sdnotify` library. Everything is a no-op when NOTIFY_SOCKET is unset (not started
by systemd), so the same code runs on a laptop.

Watchdog pings (WATCHDOG=1) come from a task on the asyncio event loop itself: if the loop is blocked (a synchronous
model call, a deadlock), the pings stop and systemd kills and restarts the service after WatchdogSec.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

log = logging.getLogger(__name__)

WATCHDOG_TASK_NAME = "service-watchdog"


def _sdnotify():
    try:
        import sdnotify
    except ImportError:  # pragma: no cover - sdnotify is a core dependency
        raise ImportError("sdnotify is not installed: pip install sdnotify") from None
    return sdnotify


class ServiceNotifier:
    """An sd_notify client for the runtime's main process.

    Construct it in the main process after start-up configuration. All methods are cheap, never raise and never block:
    the socket is non-blocking, so a busy or vanished systemd drops a message instead of stalling the event loop.
    """

    def __init__(self) -> None:
        self._socket_path = os.environ.get("NOTIFY_SOCKET") or None
        self._sd = None
        if self._socket_path:
            # sdnotify reads NOTIFY_SOCKET itself (abstract "@" names included) and connects once.
            self._sd = _sdnotify().SystemdNotifier()
            if self._sd.socket is None:
                log.warning("NOTIFY_SOCKET=%s cannot be connected; service notifications disabled", self._socket_path)
                self._sd = None
            else:
                # sdnotify sends with a blocking socket; a full receive queue must not block the event loop.
                self._sd.socket.setblocking(False)

    @property
    def enabled(self) -> bool:
        """True when started by systemd with a notification socket (Type=notify)."""
        return self._sd is not None

    def _send(self, *fields: str) -> None:
        if self._sd is not None:
            self._sd.notify("\n".join(fields))

    def ready(self, status: str | None = None) -> None:
        """Start-up is complete (models loaded, devices open): systemd marks the unit active."""
        self._send("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> None:
        """A one-line status shown by `systemctl status` (e.g. "loading ASR model")."""
        self._send(f"STATUS={text}")

    def stopping(self, status: str | None = None) -> None:
        """Graceful shutdown has begun (send on SIGTERM, before closing the session)."""
        self._send("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def extend_timeout(self, seconds: float) -> None:
        """Ask for `seconds` more than TimeoutStartSec/TimeoutStopSec from now (slow model load on an SD card)."""
        self._send(f"EXTEND_TIMEOUT_USEC={max(1, int(seconds * 1_000_000))}")

    def watchdog_ping(self) -> None:
        """One keep-alive. Normally sent by `run_watchdog`, not called directly."""
        self._send("WATCHDOG=1")

    def watchdog_interval_s(self) -> float | None:
        """WatchdogSec in seconds when the watchdog is meant for this process, else None.

        Mirrors sd_watchdog_enabled(): WATCHDOG_USEC must be a positive integer and, when WATCHDOG_PID is set, it
        must be our pid (a child that inherited the environment must not ping for its parent).
        """
        if not self.enabled:
            return None
        raw = os.environ.get("WATCHDOG_USEC", "")
        try:
            usec = int(raw)
        except ValueError:
            return None
        if usec <= 0:
            return None
        pid = os.environ.get("WATCHDOG_PID")
        if pid:
            try:
                if int(pid) != os.getpid():
                    return None
            except ValueError:
                return None
        return usec / 1_000_000

    async def run_watchdog(self, is_healthy: Callable[[], bool] | None = None) -> None:
        """Ping WATCHDOG=1 every interval/2 from the event loop until cancelled; returns at once without a watchdog.

        `is_healthy`, when given, is asked before each ping; returning False skips the ping, so a stage that is
        wedged off the loop (a dead capture thread) also leads to a restart.
        """
        interval = self.watchdog_interval_s()
        if interval is None:
            return
        period = interval / 2
        log.debug("watchdog: pinging every %.3f s", period)
        while True:
            if is_healthy is None or is_healthy():
                self.watchdog_ping()
            else:
                log.warning("watchdog: runtime unhealthy, ping withheld")
            await asyncio.sleep(period)

    def start_watchdog(self, is_healthy: Callable[[], bool] | None = None) -> asyncio.Task[None] | None:
        """Start `run_watchdog` as the named task "service-watchdog" (the caller owns and cancels it).

        Returns None when there is no watchdog to ping. Must be called from a running event loop.
        """
        if self.watchdog_interval_s() is None:
            return None
        return asyncio.create_task(self.run_watchdog(is_healthy), name=WATCHDOG_TASK_NAME)

    def close(self) -> None:
        """Close the notification socket (further calls become no-ops)."""
        if self._sd is not None:
            self._sd.socket.close()
            self._sd = None
