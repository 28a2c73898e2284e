"""SIGTERM/SIGINT → one graceful-stop callback; a service process stops with STOPPING=1 and exit code 0."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from toy_runtime.service import install_shutdown_handlers

REPO = Path(__file__).resolve().parents[2]


async def test_first_signal_calls_on_shutdown_once():
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    calls: list[int] = []

    def on_shutdown() -> None:
        calls.append(1)
        stop.set()

    handlers = install_shutdown_handlers(loop, on_shutdown)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), timeout=5)
        os.kill(os.getpid(), signal.SIGINT)  # a second signal during the stop: ignored, no KeyboardInterrupt
        await asyncio.sleep(0.1)
        assert calls == [1]
        assert handlers.received is signal.SIGTERM
    finally:
        handlers.remove()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from toy_runtime.service import ServiceNotifier, install_shutdown_handlers

    async def main() -> int:
        notifier = ServiceNotifier()
        stop = asyncio.Event()
        handlers = install_shutdown_handlers(asyncio.get_running_loop(), stop.set)
        watchdog = notifier.start_watchdog()
        notifier.status("loading models")
        await asyncio.to_thread(lambda: None)   # where the models would load, off the loop
        notifier.ready("listening")
        await stop.wait()
        notifier.stopping(f"stopping on {handlers.received.name}")
        watchdog.cancel()
        try:
            await watchdog
        except asyncio.CancelledError:
            pass
        return 0

    sys.exit(asyncio.run(main()))
    """
)


def test_service_process_contract(notify_listener):
    env = dict(os.environ, NOTIFY_SOCKET=str(notify_listener.path), WATCHDOG_USEC="200000",
               PYTHONPATH=str(REPO))
    env.pop("WATCHDOG_PID", None)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=REPO)
    try:
        assert notify_listener.wait_for(lambda m: "READY=1\nSTATUS=listening" in m, timeout_s=20)
        assert notify_listener.wait_for(lambda m: "WATCHDOG=1" in m)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    texts = notify_listener.texts()
    assert texts[0] == "STATUS=loading models"
    assert texts.index("READY=1\nSTATUS=listening") < texts.index("STOPPING=1\nSTATUS=stopping on SIGTERM")
