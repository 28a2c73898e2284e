"""Fixtures for the built-in plugin contract tests: in-memory ports, the default registry and a kernel."""

from __future__ import annotations

import pytest

from toy_runtime.audit import MemoryAudit
from toy_runtime.events import EventKernel
from toy_runtime.fakes import memory_ports
from toy_runtime.plugins import default_registry
from toy_runtime.fakes.clock import ManualClock
from toy_runtime.signals import SignalBus

from .helpers import SH_NOW


@pytest.fixture
def bus() -> SignalBus:
    return SignalBus()


@pytest.fixture
def ports(bus):
    return memory_ports(signals=bus, clock=ManualClock(SH_NOW))


@pytest.fixture
def registry(ports):
    return default_registry(ports)


@pytest.fixture
def audit() -> MemoryAudit:
    return MemoryAudit()


@pytest.fixture
def kernel(registry, audit) -> EventKernel:
    return EventKernel(registry, audit=audit, batch_deadline_s=5.0, terminal_barrier_s=2.0)
