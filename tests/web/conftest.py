"""Fixtures for the debug console: a free loopback port, a real `toy-runtime` process and a headless chromium."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from toy_runtime.testing.browser import find_chromium
from toy_runtime.testing.services import unavailable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runtime_env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
    env.update({"TOY_STATE_DIR": str(tmp_path), **extra})
    return env


def start(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "toy_runtime", *args], env=env, text=True, **kw)


@pytest.fixture
def chromium():
    if find_chromium() is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("aiohttp")
