"""The figures fleet-sim reports: percentiles and the connections-per-second peak (no broker needed)."""

from __future__ import annotations

from firmware_bridge.fleet_sim import connections_per_second_peak, percentile, raise_fd_limit


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0 and percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0  # unsorted input


def test_the_peak_counts_good_connections_per_second_after_the_kill():
    killed = 100.0
    times = [99.5, 100.1, 100.2, 101.0, 101.1, 101.2, 101.9, 103.5]
    assert connections_per_second_peak(times, killed) == 4  # 101.0-101.9; the one before the kill does not count
    assert connections_per_second_peak([], killed) == 0


def test_the_fd_limit_is_raised_but_never_past_the_hard_limit():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        now = raise_fd_limit(soft + 1)
        assert now == min(soft + 1, hard) if hard != resource.RLIM_INFINITY else now == soft + 1
        assert raise_fd_limit(1) == now  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
