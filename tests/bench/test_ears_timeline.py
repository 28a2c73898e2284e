"""bench ears judges live checks on the capture's sample count, not on the capture clock that drifts from it."""

from __future__ import annotations

import pytest

from toy_runtime.bench.ears import _sample_timeline


def test_a_live_time_maps_onto_the_sample_count_when_the_clocks_drift():
    # the capture clock runs 0.28 ms/s ahead of the samples (as on the virtual card): after 400 s, 112 ms
    stamps = [100.0 + i * 0.02 * 1.00028 for i in range(20_000)]
    on_count = _sample_timeline(stamps, 0.02)
    assert on_count(stamps[0]) == pytest.approx(0.0)
    late = stamps[18_790] + 0.01  # half a frame into frame 18,790
    assert on_count(late) == pytest.approx(18_790 * 0.02 + 0.01, abs=1e-4)
    # the naive "time minus the first stamp" is a tenth of a second off by then: enough to miss a 40 ms match
    assert (late - stamps[0]) - on_count(late) > 0.1


def test_past_the_last_frame_the_last_offset_holds():
    stamps = [5.0, 5.02, 5.04]
    on_count = _sample_timeline(stamps, 0.02)
    assert on_count(5.5) == pytest.approx(0.04 + 0.46)
    assert _sample_timeline([], 0.02)(3.0) == 3.0
