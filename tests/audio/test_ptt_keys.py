"""Hold-to-talk from key times: a held space (its key-repeat) talks until the repeats stop; a tap or Enter latches."""

from __future__ import annotations

import pytest

from toy_runtime.app.ptt_keys import ENTER, SPACE, HoldToTalk


def repeats(machine: HoldToTalk, start: float, until: float, every: float = 0.033) -> list:
    """Key-repeat of a held space from `start` to `until`; the state changes it caused."""
    changes, t = [], start
    while t <= until:
        changes.append(machine.key(SPACE, t))
        t += every
    return [c for c in changes if c is not None]


def test_a_held_space_talks_until_its_repeats_stop():
    m = HoldToTalk(release_s=0.25, repeat_window_s=0.8)
    assert m.key(SPACE, 10.0) is True  # talking at once: no wait for the typematic delay
    assert m.deadline() == pytest.approx(10.8)
    assert repeats(m, 10.5, 12.0) == []  # first repeat after a 0.5 s delay, then ~30/s: still talking
    last = m.deadline() - 0.25
    assert m.expire(last + 0.2) is None  # not yet released
    assert m.talking
    assert m.expire(last + 0.25) is False  # no repeat for 250 ms: let go
    assert not m.talking and m.deadline() is None


def test_a_tap_latches_and_the_next_press_stops():
    m = HoldToTalk(release_s=0.25, repeat_window_s=0.8)
    assert m.key(SPACE, 1.0) is True
    assert m.expire(1.8) is None and m.talking  # no repeat within the window: a tap, talking stays on
    assert m.deadline() is None
    assert m.key(SPACE, 5.0) is False


def test_a_long_typematic_delay_still_counts_as_a_hold():
    m = HoldToTalk(release_s=0.25, repeat_window_s=0.8)
    m.key(SPACE, 0.0)
    assert m.key(SPACE, 0.66) is None  # X11's default 660 ms delay: the first repeat, not a second press
    assert m.talking and m.deadline() == pytest.approx(0.91)


def test_enter_toggles_and_other_keys_do_nothing():
    m = HoldToTalk()
    assert m.key("x", 0.0) is None and not m.talking
    assert m.key(ENTER, 0.0) is True
    assert m.deadline() is None  # Enter never releases by itself
    assert m.key(ENTER, 9.0) is False
    assert m.key(ENTER, 9.5) is True
    m.reset()
    assert not m.talking and m.deadline() is None


def test_bad_windows_are_refused():
    with pytest.raises(ValueError):
        HoldToTalk(release_s=1.0, repeat_window_s=0.5)

