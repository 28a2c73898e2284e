"""Generic definitions for kernel tests: names are arbitrary so the kernel cannot special-case them."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

import pytest

from toy_runtime.audit import MemoryAudit
from toy_runtime.events import (
    EventDefinition,
    EventFailure,
    EventKernel,
    EventRegistry,
    Resolution,
    ResolveContext,
    ResultPolicy,
)

NUMBER_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 10}},
    "required": ["n"],
    "additionalProperties": False,
}


def number_resolver(proposed, ctx):
    """Takes `n` from the proposal, or the first digit in the utterance; 'maybe' makes it ambiguous."""
    if proposed and "n" in proposed:
        try:
            return Resolution(arguments={"n": int(proposed["n"])})
        except (TypeError, ValueError):
            return Resolution(arguments={}, error="n is not a number", error_code="bad_n")
    digits = [c for c in ctx.utterance if c.isdigit()]
    if digits:
        return Resolution(arguments={"n": int(digits[0])})
    return Resolution(arguments={}, missing=("n",), question="Which number?")


class Recorder:
    """Handler factory that records calls with start/end times."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict, float, float]] = []

    def handler(self, name: str, delay: float = 0.0, fail: bool = False, transient_failures: int = 0):
        state = {"left": transient_failures}

        async def handle(args, ctx):
            start = time.perf_counter()
            await asyncio.sleep(delay)
            self.calls.append((name, dict(args), start, time.perf_counter()))
            if state["left"] > 0:
                state["left"] -= 1
                raise EventFailure("flaky", "temporary", {"transient": True})
            if fail:
                raise EventFailure("broken", f"{name} failed")
            return {"done": name, **args}

        return handle


def make_definition(name, tool, handler, policy=ResultPolicy.SILENT_SUCCESS, **kw):
    return EventDefinition(
        name=name,
        version=1,
        tool_name=tool,
        description=f"test event {name}",
        schema=NUMBER_SCHEMA,
        resolver=number_resolver,
        handler=handler,
        result_policy=policy,
        **kw,
    )


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def context():
    return ResolveContext(utterance="", request_time=datetime(2026, 11, 30, 8, tzinfo=timezone.utc), timezone="UTC")


@pytest.fixture
def audit():
    return MemoryAudit()


def kernel_for(*definitions, audit=None, **kw):
    return EventKernel(EventRegistry(definitions), audit=audit or MemoryAudit(), **kw)
