"""Reconnect delays: exponential backoff with full jitter and a cap (firmware_bridge/backoff.py), and the paho seam
it replaces."""

from __future__ import annotations

import random
import statistics

import pytest

from firmware_bridge.backoff import Backoff


def test_delays_stay_within_the_doubling_ceiling_and_the_cap():
    backoff = Backoff(0.5, 30.0, uniform=random.Random(7).uniform)
    ceilings = [backoff.ceiling(n) for n in range(10)]
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    for ceiling in ceilings:
        assert 0.0 <= backoff.next_delay() <= ceiling
    assert backoff.ceiling(10_000) == 30.0  # no overflow after a very long outage


def test_full_jitter_spreads_a_herd_over_the_whole_window():
    """10,000 toys losing the broker at once: their first retries cover [0, base] evenly instead of one instant."""
    rng = random.Random(1)
    firsts = [Backoff(0.5, 30.0, uniform=rng.uniform).next_delay() for _ in range(10_000)]
    assert min(firsts) >= 0.0 and max(firsts) <= 0.5
    assert 0.23 < statistics.mean(firsts) < 0.27  # uniform: mean = ceiling / 2
    per_tenth = [sum(1 for d in firsts if i * 0.05 <= d < (i + 1) * 0.05) for i in range(10)]
    assert max(per_tenth) < 1.15 * 1000 and min(per_tenth) > 0.85 * 1000  # no bucket holds a crowd
    sixth = []
    for _ in range(2_000):
        b = Backoff(0.5, 30.0, uniform=rng.uniform)
        sixth.append([b.next_delay() for _ in range(6)][-1])
    assert max(sixth) <= 16.0 and statistics.mean(sixth) == pytest.approx(8.0, rel=0.1)


def test_the_bounds_hold_whatever_the_random_source_returns():
    lowest = Backoff(0.5, 4.0, uniform=lambda a, b: a)
    highest = Backoff(0.5, 4.0, uniform=lambda a, b: b)
    broken = Backoff(0.5, 4.0, uniform=lambda a, b: b * 10)  # a bad source cannot exceed the ceiling
    assert [lowest.next_delay() for _ in range(5)] == [0.0] * 5
    assert [highest.next_delay() for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert [broken.next_delay() for _ in range(2)] == [0.5, 1.0]
    highest.reset()
    assert highest.next_delay() == 0.5
    with pytest.raises(ValueError):
        Backoff(0.0, 1.0)


def test_paho_still_has_the_reconnect_wait_we_replace():
    """Our jittered wait overrides paho's private `_reconnect_wait`: an upgrade that renames it must fail here, not
    silently bring the lockstep retries back."""
    import paho.mqtt.client as mqtt

    from firmware_bridge.endpoint import _client_class

    assert callable(getattr(mqtt.Client, "_reconnect_wait", None))
    assert hasattr(mqtt, "_ConnectionState")
    assert "_reconnect_wait" in vars(_client_class(mqtt))
