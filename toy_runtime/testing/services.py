"""Small helpers shared by the test suites and benchmark scripts that drive real services and real processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

REQUIRE_ENV = "TOY_REQUIRE_SERVICES"


def unavailable(reason: str) -> None:
    """Skip a test whose service, model or rig cannot be had here — but fail in CI, where
    `TOY_REQUIRE_SERVICES=1` says it must be there."""
    import pytest

    if os.environ.get(REQUIRE_ENV):
        pytest.fail(reason)
    pytest.skip(reason)


def service_unavailable(what: str, exc: BaseException) -> None:
    """`unavailable()` for a service that failed to start; in CI the original error is raised as it is."""
    if os.environ.get(REQUIRE_ENV):
        raise exc
    unavailable(f"{what} unavailable: {exc}")


def audit_records(path: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Records of a JSONL audit file (all, or one kind); unparseable lines (a write in progress) are skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if kind is None or record.get("kind") == kind:
            out.append(record)
    return out


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, proc=None, poll_s: float = 0.1) -> Any:
    """Poll until `predicate()` is truthy and return it; AssertionError on timeout or when `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited ({proc.returncode}) while waiting for {what}")
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


def child_env(*, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment for a `toy-runtime` subprocess under test: this process's without its TOY_/OPENAI_ settings
    (and any other prefix in `drop`), with the holding cue moved out of reach. A turn slowed only by a loaded
    machine must not gain a cue in a test that compares what was said; the cue's own tests set it explicitly."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_", *drop))}
    env["TOY_AGENT__HOLDING_CUE_AFTER_S"] = "600"
    return env


def end_process(proc, timeout_s: float = 20.0) -> None:
    """Terminate a child process and wait for it; kill it if it has not gone within `timeout_s`. Idempotent."""
    import subprocess

    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
