"""LimitedLog: a flood of lines a hostile client can trigger is cut to a burst per window and summed up."""

from __future__ import annotations

import logging

import pytest

from firmware_bridge.ratelog import LimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_per_window_then_one_summary_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    limited = LimitedLog(logging.getLogger("test.ratelog"), "bad-message", burst=3, window_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.ratelog"):
        logged = [limited.warning("bad %d", i) for i in range(10)]
        assert logged == [True] * 3 + [False] * 7
        assert [r.getMessage() for r in caplog.records] == ["bad 0", "bad 1", "bad 2"]
        clock.now = 59.9
        assert limited.warning("bad 10") is False
        clock.now = 60.0  # a new window: first the summary of what was left out, then the line itself
        assert limited.warning("bad 11") is True
    messages = [r.getMessage() for r in caplog.records]
    assert messages[3:] == ["8 more bad-message line(s) were not logged in the last 60 s", "bad 11"]
    assert limited.suppressed_total == 8


def test_flush_says_what_was_left_out_once(caplog: pytest.LogCaptureFixture) -> None:
    limited = LimitedLog(logging.getLogger("test.ratelog"), "bad-message", burst=1, window_s=60, clock=Clock())
    with caplog.at_level(logging.WARNING, logger="test.ratelog"):
        for i in range(4):
            limited.error("bad %d", i)
        limited.flush()
        limited.flush()  # nothing new: no second summary
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, "bad 0"), (logging.ERROR, "3 more bad-message line(s) were not logged in the last 60 s")]


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        LimitedLog(logging.getLogger("x"), "x", burst=0)
