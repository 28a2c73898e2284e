"""ServiceNotifier against a real AF_UNIX datagram socket standing in for systemd."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time

import pytest

from toy_runtime.service import ServiceNotifier
from toy_runtime.service.notify import WATCHDOG_TASK_NAME


async def test_noop_without_notify_socket(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    notifier = ServiceNotifier()
    assert not notifier.enabled
    notifier.ready("up")
    notifier.status("x")
    notifier.stopping()
    notifier.watchdog_ping()
    assert notifier.watchdog_interval_s() is None
    assert notifier.start_watchdog() is None
    await asyncio.wait_for(notifier.run_watchdog(), timeout=1)  # returns at once: nothing to ping


async def test_ready_arrives_only_when_ready_is_called(notify_listener):
    notifier = ServiceNotifier()
    assert notifier.enabled
    notifier.status("loading ASR model")
    notifier.extend_timeout(30)
    assert notify_listener.wait_for(lambda m: len(m) == 2)
    await asyncio.sleep(0.1)
    assert not any("READY=1" in m for m in notify_listener.texts())
    notifier.ready("listening")
    assert notify_listener.wait_for(lambda m: len(m) == 3)
    assert notify_listener.texts() == [
        "STATUS=loading ASR model",
        "EXTEND_TIMEOUT_USEC=30000000",
        "READY=1\nSTATUS=listening",
    ]
    notifier.stopping("closing the session")
    assert notify_listener.wait_for(lambda m: m[-1:] == ["STOPPING=1\nSTATUS=closing the session"])
    notifier.close()
    notifier.ready()  # after close: a no-op, not an error
    assert not notifier.enabled


def test_watchdog_interval_from_environment(notify_listener, monkeypatch):
    notifier = ServiceNotifier()
    assert notifier.watchdog_interval_s() is None  # WatchdogSec= not set
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    assert notifier.watchdog_interval_s() == 30.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert notifier.watchdog_interval_s() == 30.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))  # meant for another process (our parent)
    assert notifier.watchdog_interval_s() is None
    monkeypatch.delenv("WATCHDOG_PID")
    for bad in ("0", "-5", "soon", ""):
        monkeypatch.setenv("WATCHDOG_USEC", bad)
        assert notifier.watchdog_interval_s() is None, bad


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_watchdog_pings_from_the_loop_and_stop_while_it_is_blocked(notify_listener, monkeypatch):
    interval_s = 0.2  # WatchdogSec=200ms → a ping every 100 ms
    monkeypatch.setenv("WATCHDOG_USEC", str(int(interval_s * 1_000_000)))
    notifier = ServiceNotifier()
    task = notifier.start_watchdog()
    assert task is not None and task.get_name() == WATCHDOG_TASK_NAME
    try:
        assert await notify_listener.until(lambda m: m.count("WATCHDOG=1") >= 3), "pings did not arrive"
        await asyncio.sleep(0)
        blocked_at = time.monotonic()
        time.sleep(5 * interval_s)  # a synchronous call wedges the event loop
        unblocked_at = time.monotonic()
        assert await notify_listener.until(lambda m: bool(
            [t for t in notify_listener.times_of("WATCHDOG=1") if t > unblocked_at])), "pings did not resume"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    times = notify_listener.times_of("WATCHDOG=1")
    # Nothing arrived while the loop was blocked. A ping sent just before the block may land a moment after it: the
    # listener's thread stamps a datagram when it gets the CPU, which on a busy machine is a while (so a generous
    # margin, within a block long enough to leave a clear window).
    late = 0.3
    during = [t for t in times if blocked_at + late < t < unblocked_at]
    assert during == []
    # So systemd saw a silence longer than WatchdogSec and would have killed + restarted the service.
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) > interval_s
    assert max(gaps) >= (unblocked_at - blocked_at) - late


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_unhealthy_runtime_withholds_pings(notify_listener, monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    healthy = threading.Event()
    task = ServiceNotifier().start_watchdog(is_healthy=healthy.is_set)
    try:
        await asyncio.sleep(0.3)
        assert "WATCHDOG=1" not in notify_listener.texts()
        healthy.set()
        assert await notify_listener.until(lambda m: "WATCHDOG=1" in m)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_sending_never_blocks_when_systemd_does_not_read(tmp_path, monkeypatch):
    # A bound socket nobody reads: its queue fills; a blocking send would hang the event loop forever.
    import tempfile

    directory = tempfile.mkdtemp(prefix="sdn-")
    path = os.path.join(directory, "full.sock")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    try:
        notifier = ServiceNotifier()
        done = threading.Event()

        def flood() -> None:
            for _ in range(5000):
                notifier.watchdog_ping()
            done.set()

        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        sender.join(timeout=10)
        assert done.is_set(), "a full notification queue blocked the sender"
        notifier.close()
    finally:
        receiver.close()
        os.unlink(path)
        os.rmdir(directory)


def test_abstract_notify_socket(monkeypatch):
    # systemd may hand out an abstract socket ("@name"); sdnotify maps "@" to the leading NUL.
    name = f"toy-runtime-test-{os.getpid()}-{time.monotonic_ns()}"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind("\0" + name)
    receiver.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
    try:
        notifier = ServiceNotifier()
        notifier.ready()
        assert receiver.recv(256) == b"READY=1"
        notifier.close()
    finally:
        receiver.close()


def test_unreachable_socket_disables_notifications(tmp_path, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens.sock"))
    notifier = ServiceNotifier()
    assert not notifier.enabled
    notifier.ready()  # no error
