"""Fixtures for the service tests: a real unix datagram socket standing in for systemd's NOTIFY_SOCKET."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class NotifyListener:
    """Receives sd_notify datagrams on a bound AF_UNIX/SOCK_DGRAM socket; a thread stamps each on arrival."""

    path: Path
    sock: socket.socket
    messages: list[tuple[float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _loop(self) -> None:
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.messages.append((time.monotonic(), data.decode()))

    def texts(self) -> list[str]:
        with self._lock:
            return [text for _, text in self.messages]

    def times_of(self, text: str) -> list[float]:
        with self._lock:
            return [t for t, m in self.messages if m == text]

    def wait_for(self, predicate, timeout_s: float = 5.0) -> bool:
        """Poll with time.sleep: for code that runs no event loop of its own."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate(self.texts()):
                return True
            time.sleep(0.01)
        return False

    async def until(self, predicate, timeout_s: float = 5.0) -> bool:
        """Poll with asyncio.sleep: the loop (and the watchdog task on it) keeps running meanwhile."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate(self.texts()):
                return True
            await asyncio.sleep(0.01)
        return False


@contextlib.contextmanager
def listening_notify_socket():
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET, read on a thread.

    A short private dir: AF_UNIX paths are limited to 107 bytes, pytest's tmp_path can be longer."""
    directory = Path(tempfile.mkdtemp(prefix="sdn-"))
    path = directory / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    listener = NotifyListener(path=path, sock=sock)
    thread = threading.Thread(target=listener._loop, name="notify-listener", daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        listener._stop.set()
        thread.join(timeout=2)
        sock.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def notify_listener(monkeypatch):
    """NOTIFY_SOCKET points at a socket this test reads; WATCHDOG_* start unset."""
    with listening_notify_socket() as listener:
        monkeypatch.setenv("NOTIFY_SOCKET", str(listener.path))
        monkeypatch.delenv("WATCHDOG_USEC", raising=False)
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
        yield listener
