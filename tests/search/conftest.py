"""A loopback SearxNG-like server per test."""

from __future__ import annotations

import pytest

from toy_runtime.testing.fake_searxng import FakeSearxng


@pytest.fixture
def fake_searxng():
    with FakeSearxng() as fake:
        yield fake
