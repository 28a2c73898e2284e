"""Fixtures for the debug console: a free loopback port, a real `toy-runtime` process (`chromium` is the plugin's)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys


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


