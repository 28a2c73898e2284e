"""Running as a system service: sd_notify readiness/watchdog and graceful shutdown on SIGTERM/SIGINT.

    notifier = ServiceNotifier()
    watchdog = notifier.start_watchdog()          # first, so slow model loading (in threads) keeps pinging
    shutdown = install_shutdown_handlers(loop, stop_event.set)
    ... load models with asyncio.to_thread, open the audio devices ...
    notifier.ready("listening")                   # only now: systemd's start job completes
    await stop_event.wait()
    notifier.stopping("closing the session")
    ... close the session, let acknowledged side effects finish, then exit 0 ...
"""

from .notify import ServiceNotifier
from .shutdown import ShutdownHandlers, install_shutdown_handlers

__all__ = ["ServiceNotifier", "ShutdownHandlers", "install_shutdown_handlers"]
